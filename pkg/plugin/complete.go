package plugin

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// completeJobName completes the job name of a command on one job: the
// MPIJobs of the namespace (of the chosen version) whose names start with
// what was typed.
func completeJobName(env *Env) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := env.Clients()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		_, jobs, err := listJobs(cmd.Context(), c, c.Namespace)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, j := range jobs {
			if strings.HasPrefix(j.Name, toComplete) {
				names = append(names, j.Name)
			}
		}
		slices.Sort(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeWorkerName completes scale-in's --pod (one name a flag: repeat
// --pod for more): the live workers of the job the command names.
func completeWorkerName(env *Env) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) != 1 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := env.Clients()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		s, err := readSnapshot(cmd.Context(), c, args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, n := range WorkersOf(s).Live() {
			if strings.HasPrefix(n, toComplete) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
