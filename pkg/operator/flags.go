package operator

import (
	"errors"
	goflag "flag"
	"fmt"
	"strings"
	"sync"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// klogFlagSet registers klog's flags on the first call.
var klogFlagSet = sync.OnceValue(func() *goflag.FlagSet {
	fs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(fs)
	return fs
})

// KlogFlags returns klog's flags (-v, --vmodule, --alsologtostderr, ...),
// registered once: klog binds them to process-wide state, so every pflag
// set shares the same Go flag set. Add them with fs.AddGoFlagSet.
func KlogFlags() *goflag.FlagSet { return klogFlagSet() }

// ParseFlags parses args (the command line without the program name) into
// fs. Every long flag may be given with one dash or two, as Go's flag
// package allows (see GoStyleArgs); an argument that is not a flag is an
// error, since the operators take only flags. The returned error is
// pflag.ErrHelp when help was asked for, after pflag has written the usage
// to fs.Output(). Any other error has been written there too, followed by a
// pointer to --help; both name the program by fs.Name().
func ParseFlags(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(GoStyleArgs(fs, args))
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q: %s takes only flags", fs.Args(), fs.Name())
	}
	if err != nil && !errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(fs.Output(), "%s: %v\nRun %s --help for the list of flags.\n", fs.Name(), err, fs.Name())
	}
	return err
}

// GoStyleArgs rewrites the single-dash long flags of Go's flag package
// (-alsologtostderr, -threadiness=2, -threadiness 2) into pflag's
// double-dash form. Upstream's operator parsed its flags with Go's flag
// package, and manifests written for it pass such arguments, which pflag
// would otherwise read as a group of one-letter shorthands. An unknown name
// is rewritten too, so that pflag reports it as an unknown flag by its name.
//
// One-letter flags (-v 4, -v=4) are pflag shorthands already and stay as
// they are; so do combined shorthands, which Go's flag package does not
// have either. The value that follows a flag of fs needing one is copied
// untouched, even when it starts with a dash, and so is everything after
// a "--" terminator.
func GoStyleArgs(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return append(out, args[i:]...)
		}
		if len(arg) < 2 || arg[0] != '-' {
			out = append(out, arg) // a positional argument, or "-"
			continue
		}
		spec, long := strings.CutPrefix(arg, "--")
		if !long {
			spec = arg[1:]
		}
		name, _, hasValue := strings.Cut(spec, "=")
		if !long && len(name) > 1 {
			arg, long = "-"+arg, true
		}
		out = append(out, arg)
		if !hasValue && needsValue(fs, name, long) && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// needsValue tells whether the flag takes the next argument as its value
// when it is given without "=": every known flag but the booleans.
func needsValue(fs *pflag.FlagSet, name string, long bool) bool {
	var f *pflag.Flag
	switch {
	case long:
		f = fs.Lookup(name)
	case len(name) == 1:
		f = fs.ShorthandLookup(name)
	}
	return f != nil && f.NoOptDefVal == ""
}
