package connect

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Providers resolves config provider references — ${env:NAME}, ${file:PATH:KEY} (a key of
// a properties file) and ${file:PATH} (a whole file) — when a task starts, so that
// secrets are never stored in the catalog nor shown by the REST API (which shows the
// reference). They are off unless the operator allow-lists environment variable prefixes
// and directories (strata serve --connect-config-env, --connect-config-dirs): a
// connector's author must not be able to read the node's environment or files.
type Providers struct {
	// EnvPrefixes are the prefixes an environment variable's name must start with.
	EnvPrefixes []string
	// Dirs are the directories a file must lie in (after following symbolic links).
	Dirs []string
}

var refPattern = regexp.MustCompile(`\$\{([a-zA-Z0-9_.-]+):([^}]*)\}`)

// isReference reports whether v holds a provider reference.
func isReference(v string) bool { return refPattern.MatchString(v) }

// NewProviders checks the allow-lists: directories must be absolute and exist.
func NewProviders(envPrefixes, dirs []string) (Providers, error) {
	p := Providers{}
	for _, e := range envPrefixes {
		if e = strings.TrimSpace(e); e != "" {
			p.EnvPrefixes = append(p.EnvPrefixes, e)
		}
	}
	for _, d := range dirs {
		if d = strings.TrimSpace(d); d == "" {
			continue
		}
		if !filepath.IsAbs(d) {
			return Providers{}, fmt.Errorf("config provider directory %q: give an absolute path", d)
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			return Providers{}, fmt.Errorf("config provider directory %q: %w", d, err)
		}
		p.Dirs = append(p.Dirs, real)
	}
	return p, nil
}

// Resolve returns cfg with every reference replaced, or per key why one could not be.
func (p Providers) Resolve(cfg map[string]string) (map[string]string, map[string]string) {
	out, errs, _ := p.resolve(cfg)
	return out, errs
}

// resolve is Resolve, with what the references resolved to: values no answer may
// carry (secrets).
func (p Providers) resolve(cfg map[string]string) (out, errs map[string]string, resolved secrets) {
	out = make(map[string]string, len(cfg))
	errs = map[string]string{}
	for k, v := range cfg {
		if !isReference(v) {
			out[k] = v
			continue
		}
		var first error
		out[k] = refPattern.ReplaceAllStringFunc(v, func(ref string) string {
			m := refPattern.FindStringSubmatch(ref)
			val, err := p.lookup(m[1], m[2])
			if err != nil && first == nil {
				first = err
			}
			resolved = resolved.add(val)
			return val
		})
		if first != nil {
			errs[k] = first.Error()
		}
		resolved = resolved.add(out[k])
	}
	return out, errs, resolved
}

func (p Providers) lookup(provider, arg string) (string, error) {
	switch provider {
	case "env":
		if len(p.EnvPrefixes) == 0 {
			return "", fmt.Errorf("${env:%s}: the env config provider is off on this node (strata serve --connect-config-env PREFIX allows variables whose names start with PREFIX)", arg)
		}
		allowed := false
		for _, pre := range p.EnvPrefixes {
			allowed = allowed || strings.HasPrefix(arg, pre)
		}
		if !allowed {
			return "", fmt.Errorf("${env:%s}: the variable's name does not start with an allowed prefix (%s)", arg, strings.Join(p.EnvPrefixes, ", "))
		}
		v, ok := os.LookupEnv(arg)
		if !ok {
			return "", fmt.Errorf("${env:%s}: the variable is not set on this node", arg)
		}
		return v, nil
	case "file":
		return p.file(arg)
	}
	return "", fmt.Errorf("${%s:...}: unknown config provider %q: use env or file", provider, provider)
}

// file reads ${file:PATH:KEY} or ${file:PATH} within the allowed directories.
func (p Providers) file(arg string) (string, error) {
	path, key := arg, ""
	if i := strings.LastIndex(arg, ":"); i > 0 {
		path, key = arg[:i], arg[i+1:]
	}
	if len(p.Dirs) == 0 {
		return "", fmt.Errorf("${file:%s}: the file config provider is off on this node (strata serve --connect-config-dirs DIR allows files under DIR)", arg)
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("${file:%s}: give an absolute path", arg)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(path))
	if err != nil {
		return "", fmt.Errorf("${file:%s}: %w", arg, err)
	}
	inside := false
	for _, d := range p.Dirs {
		if rel, err := filepath.Rel(d, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			inside = true
		}
	}
	if !inside {
		return "", fmt.Errorf("${file:%s}: %s is outside the directories config providers may read (%s)", arg, path, strings.Join(p.Dirs, ", "))
	}
	b, err := os.ReadFile(real)
	if err != nil {
		return "", fmt.Errorf("${file:%s}: %w", arg, err)
	}
	if key == "" {
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			continue
		}
		if strings.TrimSpace(line[:i]) == key {
			return strings.TrimSpace(line[i+1:]), nil
		}
	}
	return "", fmt.Errorf("${file:%s}: no key %q in %s", arg, key, path)
}
