package broker

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// Config changes as Kafka's admin APIs make them: AlterConfigs replaces a topic's
// explicit configs with those named (the rest go back to their defaults), and
// IncrementalAlterConfigs sets, deletes, appends to or subtracts from one config at a
// time. Both check the result as a whole and may only validate.

// ConfigOp is what a ConfigChange does.
type ConfigOp int8

// The operations, numbered as Kafka's IncrementalAlterConfigs numbers them.
const (
	ConfigSet      ConfigOp = 0
	ConfigDelete   ConfigOp = 1 // back to the default
	ConfigAppend   ConfigOp = 2 // add items to a list config
	ConfigSubtract ConfigOp = 3 // remove items from a list config
)

// listConfigs are the configs whose value is a comma-separated list.
var listConfigs = map[string]bool{"cleanup.policy": true}

// ConfigChange is one change of AlterConfigs.
type ConfigChange struct {
	Name  string
	Op    ConfigOp
	Value string // for ConfigSet, ConfigAppend, ConfigSubtract
}

// AlterConfigsRequest changes a topic's configs.
type AlterConfigsRequest struct {
	Changes []ConfigChange
	// Replace: the changes (all ConfigSet) are the topic's explicit configs from now on;
	// every other config goes back to its default.
	Replace bool
	// ValidateOnly checks everything and changes nothing; the answer is the topic as it
	// would be.
	ValidateOnly bool
}

// AlterConfigs applies req to a topic's explicit configs and answers the topic.
func (b *Broker) AlterConfigs(ctx context.Context, who Principal, topic string, req AlterConfigsRequest) (catalog.Topic, error) {
	if e := b.authorize(ctx, who, acl.OpAlterConfigs, acl.Topic(topic)); e != nil {
		return catalog.Topic{}, e
	}
	t, err := b.topic(ctx, "alter configs", topic)
	if err != nil {
		return catalog.Topic{}, err
	}
	next := maps.Clone(t.Configs)
	if next == nil || req.Replace {
		next = map[string]string{}
	}
	seen := map[string]bool{}
	for _, c := range req.Changes {
		if seen[c.Name] {
			return catalog.Topic{}, newError(CodeInvalidRequest, "config %s is named twice: name each config once", c.Name).with("config", c.Name)
		}
		seen[c.Name] = true
		if _, ok := catalog.ConfigDefault(c.Name); !ok {
			return catalog.Topic{}, newError(CodeInvalidConfig, "config %s: unknown config (supported: %s)", c.Name, strings.Join(catalog.ConfigKeys(), ", ")).with("config", c.Name)
		}
		if e := applyConfigChange(next, c, req.Replace); e != nil {
			return catalog.Topic{}, e
		}
	}
	if _, err := catalog.ParseConfig(next); err != nil {
		return catalog.Topic{}, catalogError("alter configs", err, onTopic(topic))
	}
	if e := b.checkConfigLimits(ctx, who, setConfigs(t.Configs, next)); e != nil {
		return catalog.Topic{}, e
	}
	if req.ValidateOnly {
		t.Configs = next
		return t, nil
	}
	// As an update: the changed and new configs, and "" for each explicit config gone.
	update := map[string]string{}
	for k, v := range next {
		if old, ok := t.Configs[k]; !ok || old != v {
			update[k] = v
		}
	}
	for k := range t.Configs {
		if _, ok := next[k]; !ok {
			update[k] = ""
		}
	}
	if len(update) == 0 {
		return t, nil
	}
	ctx = withAudit(ctx, who, "topic.alter", acl.Topic(topic), alterDetails(0, update))
	nt, err := b.d.Catalog.UpdateTopic(ctx, topic, 0, update)
	b.topics.invalidate(topic)
	if err != nil {
		return catalog.Topic{}, catalogError("alter configs", err, onTopic(topic))
	}
	return nt, nil
}

// applyConfigChange applies c to the explicit configs m.
func applyConfigChange(m map[string]string, c ConfigChange, replace bool) *Error {
	if replace && c.Op != ConfigSet {
		return newError(CodeInvalidRequest, "config %s: replacing a topic's configs only sets them", c.Name).with("config", c.Name)
	}
	switch c.Op {
	case ConfigSet:
		m[c.Name] = c.Value
	case ConfigDelete:
		delete(m, c.Name)
	case ConfigAppend, ConfigSubtract:
		if !listConfigs[c.Name] {
			return newError(CodeInvalidConfig, "config %s is not a list: set it instead of appending or subtracting", c.Name).with("config", c.Name)
		}
		cur, ok := m[c.Name]
		if !ok {
			cur, _ = catalog.ConfigDefault(c.Name)
		}
		items := map[string]bool{}
		for _, it := range splitList(cur) {
			items[it] = true
		}
		for _, it := range splitList(c.Value) {
			items[it] = c.Op == ConfigAppend
		}
		var keep []string
		for it, in := range items {
			if in {
				keep = append(keep, it)
			}
		}
		if len(keep) == 0 {
			return newError(CodeInvalidConfig, "config %s: nothing would be left: delete it to go back to the default", c.Name).with("config", c.Name)
		}
		// One order for a list's items: "compact,delete" whatever order they came in.
		sort.Strings(keep)
		m[c.Name] = strings.Join(keep, ",")
	default:
		return newError(CodeInvalidRequest, "config %s: unknown operation %d: use set (0), delete (1), append (2) or subtract (3)", c.Name, c.Op).with("config", c.Name)
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for it := range strings.SplitSeq(v, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return slices.Compact(out)
}

// setConfigs are the configs of next that old did not have at that value: those being
// set, which the operator's limits apply to.
func setConfigs(old, next map[string]string) map[string]string {
	set := map[string]string{}
	for k, v := range next {
		if o, ok := old[k]; !ok || o != v {
			set[k] = v
		}
	}
	return set
}
