package connect

// Settings reads a task's config for connector plugins outside this package: typed
// values of the validated config, falling back to the keys' defaults.
type Settings struct{ g getter }

// NewSettings reads cfg with keys' defaults.
func NewSettings(cfg map[string]string, keys []ConfigKey) Settings {
	return Settings{newGetter(cfg, keys)}
}

func (s Settings) String(name string) string { return s.g.str(name) }
func (s Settings) Int64(name string) int64   { return s.g.int64(name) }
func (s Settings) Bool(name string) bool     { return s.g.bool(name) }
func (s Settings) List(name string) []string { return s.g.list(name) }

// AtLeast is a ConfigKey.Check refusing numbers below n.
func AtLeast(n int64) func(string) error { return atLeast(n) }

// OneOf is a ConfigKey.Check refusing values outside vals.
func OneOf(vals ...string) func(string) error { return oneOf(vals...) }
