package connect

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Plugins are the connectors a runtime knows, by class name or alias.
type Plugins struct {
	list []Plugin
}

// DefaultPlugins are the built-in connectors: the file source and the file sink.
func DefaultPlugins() *Plugins {
	return NewPlugins(Source(FileSourceConnector{}), Sink(FileSinkConnector{}))
}

// NewPlugins is a set of connectors.
func NewPlugins(ps ...Plugin) *Plugins { return &Plugins{list: ps} }

// Lookup finds a connector by its class, its simple name, or that without
// "Connector" (as Kafka Connect's aliases do).
func (p *Plugins) Lookup(class string) (Plugin, bool) {
	class = strings.TrimSpace(class)
	for _, c := range p.list {
		full := c.Class()
		simple := full[strings.LastIndex(full, ".")+1:]
		if class == full || class == simple || class == strings.TrimSuffix(simple, "Connector") {
			return c, true
		}
	}
	return Plugin{}, false
}

// All lists the connectors by class.
func (p *Plugins) All() []Plugin {
	out := slices.Clone(p.list)
	sort.Slice(out, func(i, j int) bool { return out[i].Class() < out[j].Class() })
	return out
}

// validation is a connector config checked against every key that applies to it.
type validation struct {
	plugin  Plugin
	results []fieldResult
	groups  []string
	errors  int
	// resolved are the values config provider references resolved to: no answer
	// shows them (every error message is redacted of them already).
	resolved secrets
}

// firstErrors lists the errors as Kafka Connect's create refusal does.
func (v validation) messages() []string {
	var out []string
	for _, r := range v.results {
		for _, e := range r.errors {
			out = append(out, r.key.Name+": "+e)
		}
	}
	return out
}

// validate checks a connector config (raw: provider references unresolved) for the
// plugin named by its connector.class, or by class when given (the validate endpoint's
// path). Provider references are resolved (errors land on their keys) and the values
// checked: the common keys, the converters', the connector's own, and each transform's
// and predicate's, prefixed as they are set.
func validate(plugins *Plugins, prov Providers, raw map[string]string, class string) (validation, error) {
	if class == "" {
		class = raw[cfgClass]
	}
	plugin, ok := plugins.Lookup(class)
	if !ok {
		if class == "" {
			return validation{}, fmt.Errorf("Connector config %s contains no connector type", describeConfig(raw))
		}
		return validation{}, fmt.Errorf("Failed to find any class that implements Connector and which name matches %s, available connectors are: %s",
			class, strings.Join(pluginClasses(plugins), ", "))
	}
	cfg, provErrs, resolved := prov.resolve(raw)
	v := validation{plugin: plugin, resolved: resolved}
	g := newGetter(cfg, commonKeys(plugin.Type()))
	conv := append(converterKeys(cfgKeyConverter, g.str(cfgKeyConverter)), converterKeys(cfgValueConverter, g.str(cfgValueConverter))...)
	order := 0
	for _, keys := range [][]ConfigKey{commonKeys(plugin.Type()), conv, plugin.Config()} {
		v.results = append(v.results, validateKeys(keys, cfg, order)...)
		order += len(keys)
	}
	v.results = append(v.results, validateTransforms(cfg, g, &order)...)
	for i := range v.results {
		r := &v.results[i]
		if e, ok := provErrs[r.key.Name]; ok {
			r.errors = append(r.errors, e)
		}
		if !slices.Contains(v.groups, r.key.Group) {
			v.groups = append(v.groups, r.key.Group)
		}
	}
	// Keys set that no definition covers carry provider errors too.
	for k, e := range provErrs {
		if !slices.ContainsFunc(v.results, func(r fieldResult) bool { return r.key.Name == k }) {
			val := raw[k]
			v.results = append(v.results, fieldResult{key: ConfigKey{Name: k, Type: TypeString, Group: groupCommon}, order: order + 1, value: &val, errors: []string{e}, visible: true})
			order++
		}
	}
	for k, e := range plugin.ValidateConfig(cfg) {
		addError(&v, k, e)
	}
	if plugin.Type() == "sink" && len(g.list(cfgTopics)) == 0 && g.str(cfgTopicsRegex) == "" {
		addError(&v, cfgTopics, "Must configure one of topics or topics.regex")
	}
	for i := range v.results {
		r := &v.results[i]
		v.errors += len(r.errors)
		// A key set by reference is named by it in its own messages, however short
		// the value it resolved to; every message is rid of every resolved value.
		rawv, set := raw[r.key.Name]
		for j, e := range r.errors {
			if set && isReference(rawv) && cfg[r.key.Name] != "" {
				e = strings.ReplaceAll(e, cfg[r.key.Name], rawv)
			}
			r.errors[j] = resolved.redact(e)
		}
		if set && isReference(rawv) {
			r.value = &rawv // the reference, never what it resolved to
		}
	}
	return v, nil
}

func addError(v *validation, key, msg string) {
	for i := range v.results {
		if v.results[i].key.Name == key {
			v.results[i].errors = append(v.results[i].errors, msg)
			return
		}
	}
}

// validateTransforms checks the transforms and predicates named in cfg: each alias's
// type and its own keys (prefixed), and that each predicate named exists.
func validateTransforms(cfg map[string]string, g getter, order *int) []fieldResult {
	var out []fieldResult
	add := func(group string, keys []ConfigKey) []fieldResult {
		for i := range keys {
			keys[i].Group = group
		}
		rs := validateKeys(keys, cfg, *order)
		*order += len(keys)
		out = append(out, rs...)
		return rs
	}
	preds := g.list(cfgPredicates)
	for _, alias := range preds {
		prefix := "predicates." + alias + "."
		group := "Predicates: " + alias
		at := len(out)
		add(group, []ConfigKey{{Name: prefix + "type", Type: TypeClass, NoDefault: true, Importance: "HIGH", Doc: "Class for the '" + alias + "' predicate."}})
		def, err := predicateName(cfg[prefix+"type"])
		if err != nil {
			if cfg[prefix+"type"] != "" {
				out[at].errors = append(out[at].errors, err.Error())
			}
			continue
		}
		if own := add(group, prefixed(prefix, def.keys)); noErrors(own) {
			if _, err := def.make(newGetter(unprefix(cfg, prefix), def.keys)); err != nil {
				out[at].errors = append(out[at].errors, err.Error())
			}
		}
	}
	for _, alias := range g.list(cfgTransforms) {
		prefix := "transforms." + alias + "."
		group := "Transforms: " + alias
		at := len(out)
		add(group, []ConfigKey{
			{Name: prefix + "type", Type: TypeClass, NoDefault: true, Importance: "HIGH", Doc: "Class for the '" + alias + "' transformation."},
			{Name: prefix + "predicate", Type: TypeString, Default: "", Importance: "MEDIUM", Doc: "The alias of a predicate used to determine whether to apply this transformation."},
			{Name: prefix + "negate", Type: TypeBoolean, Default: "false", Importance: "MEDIUM", Doc: "Whether the configured predicate should be negated."},
		})
		if p := cfg[prefix+"predicate"]; p != "" && !slices.Contains(preds, p) {
			out[at+1].errors = append(out[at+1].errors, fmt.Sprintf("Invalid value %s for configuration %s: the predicate is not listed in predicates", p, prefix+"predicate"))
		}
		def, _, key, err := transformName(cfg[prefix+"type"])
		if err != nil {
			if cfg[prefix+"type"] != "" {
				out[at].errors = append(out[at].errors, err.Error())
			}
			continue
		}
		if own := add(group, prefixed(prefix, def.keys)); noErrors(own) {
			if _, err := def.make(newGetter(unprefix(cfg, prefix), def.keys), key); err != nil {
				out[at].errors = append(out[at].errors, err.Error())
			}
		}
	}
	return out
}

func noErrors(rs []fieldResult) bool {
	for _, r := range rs {
		if len(r.errors) > 0 {
			return false
		}
	}
	return true
}

func prefixed(prefix string, keys []ConfigKey) []ConfigKey {
	out := slices.Clone(keys)
	for i := range out {
		out[i].Name = prefix + out[i].Name
	}
	return out
}

func unprefix(cfg map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range cfg {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = v
		}
	}
	return out
}

func pluginClasses(p *Plugins) []string {
	var out []string
	for _, c := range p.All() {
		out = append(out, c.Class())
	}
	return out
}

func describeConfig(cfg map[string]string) string {
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := cfg[k]
		if secretName.MatchString(k) {
			v = hidden
		}
		parts[i] = k + "=" + v
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// buildChain builds a validated config's transforms.
func buildChain(cfg map[string]string) (chain, error) {
	g := newGetter(cfg, commonKeys("source"))
	preds := map[string]predicate{}
	for _, alias := range g.list(cfgPredicates) {
		prefix := "predicates." + alias + "."
		def, err := predicateName(cfg[prefix+"type"])
		if err != nil {
			return nil, fmt.Errorf("predicate %s: %w", alias, err)
		}
		p, err := def.make(newGetter(unprefix(cfg, prefix), def.keys))
		if err != nil {
			return nil, fmt.Errorf("predicate %s: %w", alias, err)
		}
		preds[alias] = p
	}
	var c chain
	for _, alias := range g.list(cfgTransforms) {
		prefix := "transforms." + alias + "."
		def, name, key, err := transformName(cfg[prefix+"type"])
		if err != nil {
			return nil, fmt.Errorf("transform %s: %w", alias, err)
		}
		t, err := def.make(newGetter(unprefix(cfg, prefix), def.keys), key)
		if err != nil {
			return nil, fmt.Errorf("transform %s: %w", alias, err)
		}
		s := step{alias: alias, class: transformsPackage + name, t: t, negate: strings.EqualFold(cfg[prefix+"negate"], "true")}
		if p := cfg[prefix+"predicate"]; p != "" {
			if s.pred = preds[p]; s.pred == nil {
				return nil, fmt.Errorf("transform %s: predicate %s is not listed in predicates", alias, p)
			}
		}
		c = append(c, s)
	}
	return c, nil
}
