package connect

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Config types, as Kafka Connect's ConfigDef names them.
const (
	TypeString   = "STRING"
	TypeInt      = "INT"
	TypeLong     = "LONG"
	TypeBoolean  = "BOOLEAN"
	TypeList     = "LIST"
	TypePassword = "PASSWORD"
	TypeClass    = "CLASS"
)

// ConfigKey describes one config key: what validate answers and checks.
type ConfigKey struct {
	Name string
	Type string
	// Default applies when the key is not set; a key without one (NoDefault) is
	// required.
	Default     string
	NoDefault   bool
	Importance  string // HIGH, MEDIUM, LOW
	Doc         string
	Group       string
	DisplayName string
	Recommended []string
	// Check refuses a set value with a reason (after the type check).
	Check func(v string) error
}

// fieldResult is one key's outcome of validation.
type fieldResult struct {
	key     ConfigKey
	order   int
	value   *string // the value set, or the default; nil: neither
	errors  []string
	visible bool
}

// checkType checks v against t, with Kafka Connect's messages.
func checkType(k ConfigKey, v string) error {
	switch k.Type {
	case TypeInt:
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: Not a number of type INT", v, k.Name)
		}
	case TypeLong:
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: Not a number of type LONG", v, k.Name)
		}
	case TypeBoolean:
		if s := strings.ToLower(strings.TrimSpace(v)); s != "true" && s != "false" {
			return fmt.Errorf("Invalid value %s for configuration %s: Expected value to be either true or false", v, k.Name)
		}
	}
	if k.Check != nil {
		if err := k.Check(v); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: %v", v, k.Name, err)
		}
	}
	return nil
}

// validateKeys checks cfg (values resolved) against keys, in order.
func validateKeys(keys []ConfigKey, cfg map[string]string, order int) []fieldResult {
	out := make([]fieldResult, 0, len(keys))
	for i, k := range keys {
		r := fieldResult{key: k, order: order + i + 1, visible: true}
		v, set := cfg[k.Name]
		switch {
		case set:
			r.value = &v
			if err := checkType(k, v); err != nil {
				r.errors = append(r.errors, err.Error())
			}
		case !k.NoDefault:
			d := k.Default
			r.value = &d
		default:
			r.errors = append(r.errors, fmt.Sprintf("Missing required configuration \"%s\" which has no default value.", k.Name))
		}
		out = append(out, r)
	}
	return out
}

// getter reads typed values of a validated config, falling back to the keys' defaults.
type getter struct {
	cfg  map[string]string
	keys map[string]ConfigKey
}

func newGetter(cfg map[string]string, keys ...[]ConfigKey) getter {
	g := getter{cfg: cfg, keys: map[string]ConfigKey{}}
	for _, ks := range keys {
		for _, k := range ks {
			g.keys[k.Name] = k
		}
	}
	return g
}

func (g getter) str(name string) string {
	if v, ok := g.cfg[name]; ok {
		return v
	}
	return g.keys[name].Default
}

func (g getter) int64(name string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(g.str(name)), 10, 64)
	return n
}

func (g getter) bool(name string) bool {
	return strings.EqualFold(strings.TrimSpace(g.str(name)), "true")
}

func (g getter) list(name string) []string { return splitList(g.str(name)) }

// splitList splits a LIST value: comma-separated, spaces trimmed, empties dropped.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		if slices.Contains(vals, v) {
			return nil
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

func atLeast(n int64) func(string) error {
	return func(v string) error {
		if x, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && x < n {
			return fmt.Errorf("Value must be at least %d", n)
		}
		return nil
	}
}

// Groups of the common keys.
const (
	groupCommon     = "Common"
	groupTransforms = "Transforms"
	groupPredicates = "Predicates"
	groupErrors     = "Error Handling"
)

// Keys of the common config.
const (
	cfgName            = "name"
	cfgClass           = "connector.class"
	cfgTasksMax        = "tasks.max"
	cfgKeyConverter    = "key.converter"
	cfgValueConverter  = "value.converter"
	cfgHeaderConverter = "header.converter"
	cfgTransforms      = "transforms"
	cfgPredicates      = "predicates"
	cfgRetryTimeout    = "errors.retry.timeout"
	cfgRetryDelayMax   = "errors.retry.delay.max.ms"
	cfgTolerance       = "errors.tolerance"
	cfgLogEnable       = "errors.log.enable"
	cfgLogMessages     = "errors.log.include.messages"
	cfgDLQTopic        = "errors.deadletterqueue.topic.name"
	cfgDLQHeaders      = "errors.deadletterqueue.context.headers.enable"
	cfgTopics          = "topics"
	cfgTopicsRegex     = "topics.regex"
	cfgFlushInterval   = "offset.flush.interval.ms"
	cfgExactlyOnce     = "exactly.once.support"
	cfgBoundary        = "transaction.boundary"
)

// commonKeys are the keys every connector takes (Kafka Connect's ConnectorConfig, with
// the dead-letter topic for sources too), then the type's own.
func commonKeys(typ string) []ConfigKey {
	keys := []ConfigKey{
		{Name: cfgName, Type: TypeString, NoDefault: true, Importance: "HIGH", Group: groupCommon, DisplayName: "Connector name",
			Doc: "Globally unique name to use for this connector (the catalog's rule: 1 to 241 characters of [a-zA-Z0-9._-])."},
		{Name: cfgClass, Type: TypeString, NoDefault: true, Importance: "HIGH", Group: groupCommon, DisplayName: "Connector class",
			Doc: "Name or alias of the class for this connector."},
		{Name: cfgTasksMax, Type: TypeInt, Default: "1", Importance: "HIGH", Group: groupCommon, DisplayName: "Tasks max",
			Doc: "Maximum number of tasks to use for this connector.", Check: atLeast(1)},
		{Name: cfgKeyConverter, Type: TypeClass, Default: "org.apache.kafka.connect.json.JsonConverter", Importance: "LOW", Group: groupCommon,
			DisplayName: "Key converter class", Doc: "How keys are turned into stored bytes and back: JsonConverter (json), StringConverter (string) or ByteArrayConverter (bytes).",
			Recommended: converterNames(), Check: checkConverter},
		{Name: cfgValueConverter, Type: TypeClass, Default: "org.apache.kafka.connect.json.JsonConverter", Importance: "LOW", Group: groupCommon,
			DisplayName: "Value converter class", Doc: "How values are turned into stored bytes and back.", Recommended: converterNames(), Check: checkConverter},
		{Name: cfgHeaderConverter, Type: TypeClass, Default: "org.apache.kafka.connect.storage.SimpleHeaderConverter", Importance: "LOW", Group: groupCommon,
			DisplayName: "Header converter class", Doc: "Header values pass through as bytes whichever is named.",
			Recommended: []string{"org.apache.kafka.connect.storage.SimpleHeaderConverter", "org.apache.kafka.connect.storage.StringConverter", "org.apache.kafka.connect.converters.ByteArrayConverter"}},
		{Name: cfgTransforms, Type: TypeList, Default: "", Importance: "LOW", Group: groupTransforms, DisplayName: "Transforms",
			Doc: "Aliases for the transformations to be applied to records, in order."},
		{Name: cfgPredicates, Type: TypeList, Default: "", Importance: "LOW", Group: groupPredicates, DisplayName: "Predicates",
			Doc: "Aliases for the predicates used by transformations."},
		{Name: cfgRetryTimeout, Type: TypeLong, Default: "0", Importance: "MEDIUM", Group: groupErrors, DisplayName: "Retry Timeout for Errors",
			Doc: "The maximum duration in milliseconds that a failed operation will be reattempted. 0: no retries; -1: infinite retries.", Check: atLeast(-1)},
		{Name: cfgRetryDelayMax, Type: TypeLong, Default: "60000", Importance: "MEDIUM", Group: groupErrors, DisplayName: "Maximum Delay Between Retries for Errors",
			Doc: "The maximum duration in milliseconds between consecutive retry attempts.", Check: atLeast(1)},
		{Name: cfgTolerance, Type: TypeString, Default: "none", Importance: "MEDIUM", Group: groupErrors, DisplayName: "Error Tolerance",
			Doc:         "Behavior for tolerating errors: 'none' fails the task at the first error; 'all' skips (and reports) problematic records.",
			Recommended: []string{"none", "all"}, Check: oneOf("none", "all")},
		{Name: cfgLogEnable, Type: TypeBoolean, Default: "false", Importance: "MEDIUM", Group: groupErrors, DisplayName: "Log Errors",
			Doc: "Log each tolerated error with its context."},
		{Name: cfgLogMessages, Type: TypeBoolean, Default: "false", Importance: "MEDIUM", Group: groupErrors, DisplayName: "Log Error Details",
			Doc: "Include the record's key and value in the error log."},
		{Name: cfgDLQTopic, Type: TypeString, Default: "", Importance: "MEDIUM", Group: groupErrors, DisplayName: "Dead Letter Queue Topic Name",
			Doc: "The topic tolerated failures go to, from every stage (poll, conversion, transforms, put, produce); created with one partition if missing. Empty: none."},
		{Name: cfgDLQHeaders, Type: TypeBoolean, Default: "true", Importance: "MEDIUM", Group: groupErrors, DisplayName: "Enable Error Context Headers",
			Doc: "Add __connect.errors.* headers with the failure's context to dead-letter records (on by default here; Kafka Connect's default is false)."},
	}
	if typ == "sink" {
		keys = append(keys,
			ConfigKey{Name: cfgTopics, Type: TypeList, Default: "", Importance: "HIGH", Group: groupCommon, DisplayName: "Topics",
				Doc: "List of topics to consume, separated by commas."},
			ConfigKey{Name: cfgTopicsRegex, Type: TypeString, Default: "", Importance: "HIGH", Group: groupCommon, DisplayName: "Topics regex",
				Doc: "Not supported yet: name the topics.", Check: func(v string) error {
					if v != "" {
						return fmt.Errorf("topics.regex is not supported yet: list the topics in topics")
					}
					return nil
				}},
			ConfigKey{Name: cfgFlushInterval, Type: TypeLong, Default: "1000", Importance: "LOW", Group: groupCommon, DisplayName: "Offset flush interval",
				Doc: "How often, in milliseconds, the task is asked what is durable downstream (PreCommit) and that is committed as the group's offsets.", Check: atLeast(10)},
		)
	} else {
		keys = append(keys,
			ConfigKey{Name: cfgExactlyOnce, Type: TypeString, Default: "requested", Importance: "MEDIUM", Group: groupCommon, DisplayName: "Exactly once support",
				Doc:         "Every source commit here is exactly-once (records and offsets in one transaction); both values are accepted.",
				Recommended: []string{"requested", "required"}, Check: oneOf("requested", "required")},
			ConfigKey{Name: cfgBoundary, Type: TypeString, Default: "poll", Importance: "MEDIUM", Group: groupCommon, DisplayName: "Transaction Boundary",
				Doc: "Each batch a task's poll returns is one transaction.", Recommended: []string{"poll"}, Check: oneOf("poll")},
		)
	}
	return keys
}

// Secret values are shown as hidden in responses.
const hidden = "[hidden]"

var secretName = regexp.MustCompile(`(?i)(password|secret|token|credential|api[._-]?key|private[._-]?key)`)

// maskConfig returns cfg with secrets hidden: keys of type PASSWORD in keys, and keys
// whose name says secret, unless the value is a provider reference (a reference, not
// the secret).
func maskConfig(cfg map[string]string, keys []ConfigKey) map[string]string {
	pw := map[string]bool{}
	for _, k := range keys {
		if k.Type == TypePassword {
			pw[k.Name] = true
		}
	}
	out := make(map[string]string, len(cfg))
	for k, v := range cfg {
		if (pw[k] || secretName.MatchString(k)) && !isReference(v) && v != "" {
			v = hidden
		}
		out[k] = v
	}
	return out
}
