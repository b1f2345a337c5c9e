// Command linkcheck checks the links of the repository's Markdown files:
// every relative link must name a file or directory of the repository, and
// every anchor (#heading) a heading of the Markdown file it points into, by
// GitHub's rules for the ids of headings. Links to http(s) addresses are not
// fetched (the check needs no network); they must be well-formed URLs with
// a host. Links inside code blocks and code spans are not links.
//
//	go run ./hack/linkcheck [-root DIR] [FILE.md ...]
//
// Without files it checks the documentation of the repository (see
// docFiles). It prints one line per broken link, FILE:LINE: what, and
// exits 1 when there is any. `make verify-links` runs it.
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

func main() {
	root := flag.String("root", ".", "the repository's root: absolute links and the bound of relative ones")
	flag.Parse()
	files := flag.Args()
	if len(files) == 0 {
		var err error
		if files, err = docFiles(*root); err != nil {
			fmt.Fprintln(os.Stderr, "linkcheck:", err)
			os.Exit(2)
		}
	}
	problems, n, err := check(*root, files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "linkcheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "linkcheck: %d broken link(s) in %d file(s)\n", len(problems), len(files))
		os.Exit(1)
	}
	fmt.Printf("linkcheck: %d link(s) in %d file(s), each resolves\n", n, len(files))
}

// docFiles lists, relative to root, the Markdown files to check: README.md,
// docs/*.md, proposals/*.md, the READMEs of v2 and of the SDK, and every
// README.md under examples/, hack/ and test/.
func docFiles(root string) ([]string, error) {
	var files []string
	for _, pattern := range []string{"README.md", "docs/*.md", "proposals/*.md", "v2/README.md", "sdk/README.md", "sdk/python/README.md"} {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				return nil, err
			}
			files = append(files, filepath.ToSlash(rel))
		}
	}
	for _, dir := range []string{"examples", "hack", "test"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) && p == filepath.Join(root, dir) {
					return filepath.SkipDir
				}
				return err
			}
			if d.IsDir() && p != filepath.Join(root, dir) && (strings.HasPrefix(d.Name(), ".") || d.Name() == "_output") {
				return filepath.SkipDir
			}
			if !d.IsDir() && d.Name() == "README.md" {
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	return files, nil
}

// doc is one parsed Markdown file.
type doc struct {
	anchors map[string]bool
	links   []link
}

type link struct {
	line   int
	target string
}

// check returns the broken links of files (paths relative to root), in
// the order of files and lines, and how many links it checked.
func check(root string, files []string) ([]string, int, error) {
	docs := map[string]*doc{} // by slash path relative to root
	load := func(rel string) (*doc, error) {
		if d, ok := docs[rel]; ok {
			return d, nil
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		d := parse(string(data))
		docs[rel] = d
		return d, nil
	}
	var problems []string
	checked := 0
	for _, f := range files {
		f = path.Clean(filepath.ToSlash(f))
		d, err := load(f)
		if err != nil {
			return nil, 0, err
		}
		checked += len(d.links)
		for _, l := range d.links {
			if msg := checkLink(root, f, l.target, load); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", f, l.line, msg))
			}
		}
	}
	return problems, checked, nil
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
var lineAnchorRE = regexp.MustCompile(`^L[0-9]+(-L[0-9]+)?$`)

// checkLink returns what is wrong with target, a link of the file from
// (slash path relative to root), or "".
func checkLink(root, from, target string, load func(string) (*doc, error)) string {
	if target == "" {
		return "empty link"
	}
	if schemeRE.MatchString(target) {
		return checkURL(target)
	}
	p, frag, _ := strings.Cut(target, "#")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	unescaped, err := url.PathUnescape(p)
	if err != nil {
		return fmt.Sprintf("%q: bad escape in the path", target)
	}
	var rel string
	switch {
	case unescaped == "":
		rel = from
	case strings.HasPrefix(unescaped, "/"):
		rel = path.Clean(strings.TrimPrefix(unescaped, "/"))
	default:
		rel = path.Clean(path.Join(path.Dir(from), unescaped))
	}
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Sprintf("%q: points outside the repository", target)
	}
	info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return fmt.Sprintf("%q: no file %s", target, rel)
	}
	if frag == "" {
		if strings.Contains(target, "#") {
			return fmt.Sprintf("%q: empty anchor", target)
		}
		return ""
	}
	switch {
	case info.IsDir():
		return fmt.Sprintf("%q: an anchor into the directory %s", target, rel)
	case strings.HasSuffix(strings.ToLower(rel), ".md"):
		d, err := load(rel)
		if err != nil {
			return fmt.Sprintf("%q: %v", target, err)
		}
		if !d.anchors[frag] {
			return fmt.Sprintf("%q: %s has no heading with the anchor #%s", target, rel, frag)
		}
	case !lineAnchorRE.MatchString(frag):
		return fmt.Sprintf("%q: #%s is neither a line (#L12, #L12-L20) nor a heading of a Markdown file", target, frag)
	}
	return ""
}

// checkURL checks an absolute link: http(s) must parse and name a host;
// mailto must name an address; other schemes are refused.
func checkURL(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Sprintf("%q: not a URL: %v", target, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		if u.Host == "" || u.Hostname() == "" {
			return fmt.Sprintf("%q: a URL without a host", target)
		}
		if strings.ContainsAny(target, " \t") {
			return fmt.Sprintf("%q: a URL with white space", target)
		}
		if u.Port() == "" && strings.HasSuffix(u.Host, ":") {
			return fmt.Sprintf("%q: a URL with an empty port", target)
		}
	case "mailto":
		if !strings.Contains(u.Opaque, "@") {
			return fmt.Sprintf("%q: a mailto link without an address", target)
		}
	default:
		return fmt.Sprintf("%q: scheme %s is neither http(s) nor mailto", target, u.Scheme)
	}
	return ""
}

var (
	fenceRE       = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")
	atxRE         = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextRE      = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	inlineRE      = regexp.MustCompile(`!?\[([^\]]*)\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)`)
	refDefRE      = regexp.MustCompile(`(?m)^ {0,3}\[([^\]]+)\]:[ \t]*(<[^>\n]*>|\S+)`)
	autolinkRE    = regexp.MustCompile(`<((?:https?|mailto):[^>\s]*)>`)
	htmlIDRE      = regexp.MustCompile(`<a\s+(?:[^>]*\s)?(?:name|id)="([^"]+)"`)
	headingCodeRE = regexp.MustCompile("(`+)[^`]+?(`+)")
	linkTextRE    = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE     = regexp.MustCompile(`<[^>]+>`)
	emphasisRE    = regexp.MustCompile(`(^|\W)[*_]+|[*_]+(\W|$)`)
	blankLineRE   = regexp.MustCompile(`\n[ \t]*\n`)
)

// parse reads a Markdown file: the anchors of its headings (and of <a
// name|id> tags) and its links, with their lines.
func parse(text string) *doc {
	d := &doc{anchors: map[string]bool{}}
	lines := strings.Split(text, "\n")
	// Blank out fenced code blocks, keeping the line count. (Indented code
	// is not told apart from a list item's indented paragraph: it is read
	// as prose, which checks a link too many rather than one too few.)
	prose := make([]string, len(lines))
	var fence string
	for i, l := range lines {
		if fence != "" {
			if m := fenceRE.FindStringSubmatch(l); m != nil && m[1][0] == fence[0] && len(m[1]) >= len(fence) && strings.TrimSpace(l[strings.Index(l, m[1])+len(m[1]):]) == "" {
				fence = ""
			}
			continue
		}
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			fence = m[1]
			continue
		}
		prose[i] = l
	}
	counts := map[string]int{}
	addHeading := func(title string) {
		base := slug(title)
		id := base
		if n := counts[base]; n > 0 {
			id = fmt.Sprintf("%s-%d", base, n)
		}
		counts[base]++
		d.anchors[id] = true
	}
	for i, l := range prose {
		if m := atxRE.FindStringSubmatch(l); m != nil {
			addHeading(m[2])
			continue
		}
		if i > 0 && setextRE.MatchString(l) && strings.TrimSpace(prose[i-1]) != "" &&
			!atxRE.MatchString(prose[i-1]) && !strings.HasPrefix(strings.TrimSpace(prose[i-1]), "|") &&
			(i < 2 || strings.TrimSpace(prose[i-2]) == "") {
			addHeading(prose[i-1])
		}
		for _, m := range htmlIDRE.FindAllStringSubmatch(l, -1) {
			d.anchors[m[1]] = true
		}
	}
	// Links: on the prose as one text, so that a link's text may span
	// lines; code spans blanked out first (they may span lines within a
	// paragraph, not across a blank line).
	body := strings.Join(prose, "\n")
	body = blankCodeSpans(body)
	lineOf := func(off int) int { return strings.Count(body[:off], "\n") + 1 }
	for _, m := range inlineRE.FindAllStringSubmatchIndex(body, -1) {
		if blankLineRE.MatchString(body[m[0]:m[1]]) {
			continue
		}
		target := strings.TrimSuffix(strings.TrimPrefix(body[m[4]:m[5]], "<"), ">")
		d.links = append(d.links, link{line: lineOf(m[0]), target: target})
	}
	for _, m := range refDefRE.FindAllStringSubmatchIndex(body, -1) {
		target := strings.TrimSuffix(strings.TrimPrefix(body[m[4]:m[5]], "<"), ">")
		d.links = append(d.links, link{line: lineOf(m[0]), target: target})
	}
	for _, m := range autolinkRE.FindAllStringSubmatchIndex(body, -1) {
		d.links = append(d.links, link{line: lineOf(m[0]), target: body[m[2]:m[3]]})
	}
	sort.SliceStable(d.links, func(i, j int) bool { return d.links[i].line < d.links[j].line })
	return d
}

// blankCodeSpans replaces each code span by spaces, keeping line breaks
// and offsets. A span is a run of backticks up to the next run of the same
// length, within a paragraph.
func blankCodeSpans(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		j := backticks(b, i)
		end := -1
		for k := j; k < len(b) && (b[k] != '\n' || !blankLineAt(b, k)); {
			if b[k] != '`' {
				k++
				continue
			}
			e := backticks(b, k)
			if e-k == j-i {
				end = e
				break
			}
			k = e
		}
		if end < 0 {
			i = j // a run of backticks that closes nothing is text
			continue
		}
		for k := i; k < end; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end
	}
	return string(b)
}

// backticks returns the end of the run of backticks that starts at b[i].
func backticks(b []byte, i int) int {
	for i < len(b) && b[i] == '`' {
		i++
	}
	return i
}

// blankLineAt reports whether the line break at b[k] starts a blank line.
func blankLineAt(b []byte, k int) bool {
	for k++; k < len(b) && b[k] != '\n'; k++ {
		if b[k] != ' ' && b[k] != '\t' {
			return false
		}
	}
	return true
}

// slug is GitHub's id of a heading: the heading's text as rendered (code
// spans, links and emphasis reduced to their text, HTML tags dropped),
// lower-cased, every character but letters, digits, marks, '-', '_' and
// spaces dropped, and each space turned into '-'.
func slug(title string) string {
	t := strings.TrimSpace(title)
	t = linkTextRE.ReplaceAllString(t, "$1")
	t = htmlTagRE.ReplaceAllString(t, "")
	// Code spans keep their '_' and '*', which are not emphasis there.
	t = headingCodeRE.ReplaceAllStringFunc(t, func(span string) string {
		return strings.NewReplacer("`", "", "_", "\uE000", "*", "\uE001").Replace(span)
	})
	for {
		n := emphasisRE.ReplaceAllString(t, "$1$2")
		if n == t {
			break
		}
		t = n
	}
	t = strings.NewReplacer("\uE000", "_", "\uE001", "*").Replace(t)
	var b strings.Builder
	for _, r := range strings.ToLower(t) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
