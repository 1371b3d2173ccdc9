package connect

import (
	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/broker"
)

// What a connector's config needs of the principal it runs as, checked by the core when
// the config is stored (broker.ConnectorPlan.Needs) — the same permissions every call
// of its tasks is checked for afterwards: a sink reads its topics and its group
// connect-<name>; a source writes the topics its plugin says it writes
// (SourceConnector.Topics); either writes its dead-letter topic. A topic named by a
// config provider reference is left to the runtime's checks: its name is the
// provider's secret until a task resolves it.

// Topics is the file source's one topic.
func (FileSourceConnector) Topics(cfg map[string]string) []string { return splitList(cfg["topic"]) }

// needsOf lists what cfg (raw) needs, in the order the core checks it.
func needsOf(p Plugin, name string, cfg map[string]string) []broker.Need {
	g := newGetter(cfg, commonKeys(p.Type()))
	var out []broker.Need
	add := func(op acl.Operation, r acl.Resource) {
		if isReference(r.Name) || r.Name == "" {
			return
		}
		for _, n := range out {
			if n.Op == op && n.Resource == r {
				return
			}
		}
		out = append(out, broker.Need{Op: op, Resource: r})
	}
	if p.sink != nil {
		for _, t := range g.list(cfgTopics) {
			add(acl.OpRead, acl.Topic(t))
		}
		add(acl.OpRead, acl.Group(sinkGroup(name)))
	} else {
		for _, t := range p.source.Topics(cfg) {
			add(acl.OpWrite, acl.Topic(t))
		}
	}
	add(acl.OpWrite, acl.Topic(g.str(cfgDLQTopic)))
	return out
}
