package registry

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// JSON Schema compatibility: Confluent's rules, written here (see jsonschema.go).

// reads compares writer (Confluent's original) with f (the update).
func (f *jsonSchemaFormat) reads(w *jsonSchemaFormat) []string {
	cx := &jsonCompat{orig: w, upd: f, seen: map[[2]uintptr]bool{}, memo: map[[2]uintptr]memoEntry{}, split: map[uintptr]splitEntry{}, budget: new(int)}
	*cx.budget = maxJSONCompares
	cx.compare("#", w.doc, f.doc)
	if *cx.budget < 0 {
		return []string{fmt.Sprintf("#: the schemas are too intricate to compare (more than %d comparisons of subschemas)", maxJSONCompares)}
	}
	return cx.problems
}

// jsonCompat is one comparison: the problems found (incompatible changes, each with
// where), the schema pairs being compared (a recursive schema compares once).
type jsonCompat struct {
	orig, upd *jsonSchemaFormat
	problems  []string
	seen      map[[2]uintptr]bool
	// memo holds what trying a pair of subschemas answered: matching the branches of
	// nested unions would otherwise compare the same pairs again and again.
	memo  map[[2]uintptr]memoEntry
	split map[uintptr]splitEntry
	depth int
	// budget is the comparisons left, shared by every sub-comparison: a schema built to
	// make the check explode is refused (as incompatible) rather than checked forever.
	budget *int
}

// memoEntry is a memoized answer, holding the pair it is about: a subschema made
// during the check (a "type" array's branch) then stays alive, so its address is not
// reused for another while the check runs.
type memoEntry struct {
	ok   bool
	o, u any
}

// maxJSONCompares bounds the subschema comparisons of one check.
const maxJSONCompares = 200000

func (cx *jsonCompat) bad(path, what string) {
	cx.problems = append(cx.problems, path+": "+what)
}

// try compares in a scratch context: whether orig and upd are compatible.
func (cx *jsonCompat) try(path string, orig, upd any) bool {
	key := [2]uintptr{ptr(orig), ptr(upd)}
	memo := key[0] != 0 && key[1] != 0
	if e, done := cx.memo[key]; memo && done {
		return e.ok
	}
	sub := &jsonCompat{orig: cx.orig, upd: cx.upd, seen: cx.seen, memo: cx.memo, split: cx.split, depth: cx.depth, budget: cx.budget}
	sub.compare(path, orig, upd)
	ok := len(sub.problems) == 0
	if memo {
		cx.memo[key] = memoEntry{ok: ok, o: orig, u: upd}
	}
	return ok
}

// The kinds of schema, as Confluent's (everit's) model sorts them.
const (
	jsEmpty    = "empty" // true, {} or only annotations: anything
	jsFalse    = "false"
	jsString   = "string"
	jsNumber   = "number" // integer too
	jsBoolean  = "boolean"
	jsNull     = "null"
	jsObject   = "object"
	jsArray    = "array"
	jsEnum     = "enum"
	jsCombined = "combined"
	jsNot      = "not"
)

// resolve follows "$ref" (to the schema's own definitions or a reference) until a
// schema that is not one; nil when it cannot.
func (cx *jsonCompat) resolve(f *jsonSchemaFormat, s any) any {
	for range 16 {
		m, ok := s.(map[string]any)
		if !ok {
			return s
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return s
		}
		s = f.lookup(ref)
	}
	return nil
}

// lookup finds ref: "#/json/pointer" in the root document, "name#/pointer" in a
// reference's.
func (f *jsonSchemaFormat) lookup(ref string) any {
	docURL, frag, _ := strings.Cut(ref, "#")
	doc := f.doc
	if docURL != "" {
		if doc = f.docs[jsonRefURL(docURL)]; doc == nil {
			return nil
		}
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		if doc, ok = m[tok]; !ok {
			return nil
		}
	}
	return doc
}

// draft2020 reads the 2019-09 and 2020-12 spellings of what draft-07 says otherwise,
// as draft-07's: prefixItems and items (a tuple and what follows it), dependentRequired
// and dependentSchemas (dependencies), unevaluatedProperties and unevaluatedItems
// where additionalProperties and additionalItems are absent. Other schemas pass as
// they are.
func draft2020(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	var out map[string]any
	set := func(k string, v any) {
		if out == nil {
			out = make(map[string]any, len(m))
			for k, v := range m {
				out[k] = v
			}
		}
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	if p, ok := m["prefixItems"].([]any); ok {
		set("additionalItems", m["items"])
		set("items", p)
		set("prefixItems", nil)
	}
	if _, ok := m["additionalProperties"]; !ok && m["unevaluatedProperties"] != nil {
		set("additionalProperties", m["unevaluatedProperties"])
	}
	cur := m
	if out != nil {
		cur = out
	}
	if _, ok := cur["additionalItems"]; !ok && m["unevaluatedItems"] != nil {
		set("additionalItems", m["unevaluatedItems"])
	}
	for _, k := range []string{"dependentRequired", "dependentSchemas"} {
		if d, ok := m[k].(map[string]any); ok {
			deps := map[string]any{}
			if out != nil {
				if old, ok := out["dependencies"].(map[string]any); ok {
					for k, v := range old {
						deps[k] = v
					}
				}
			} else if old, ok := m["dependencies"].(map[string]any); ok {
				for k, v := range old {
					deps[k] = v
				}
			}
			for k, v := range d {
				deps[k] = v
			}
			set("dependencies", deps)
		}
	}
	if out == nil {
		return m
	}
	return out
}

// kind sorts a schema; a "type" array is a combined anyOf of one schema per type.
func kind(s any) string {
	switch v := s.(type) {
	case bool:
		if v {
			return jsEmpty
		}
		return jsFalse
	case map[string]any:
		if typedEnum(v) {
			return jsCombined
		}
		if _, ok := v["enum"]; ok {
			return jsEnum
		}
		if _, ok := v["const"]; ok {
			return jsEnum
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			if _, ok := v[k]; ok {
				return jsCombined
			}
		}
		if _, ok := v["not"]; ok {
			return jsNot
		}
		switch t := v["type"].(type) {
		case string:
			if t == "integer" {
				return jsNumber
			}
			return t
		case []any:
			return jsCombined
		}
		for k, kd := range map[string]string{
			"properties": jsObject, "required": jsObject, "additionalProperties": jsObject, "patternProperties": jsObject,
			"minProperties": jsObject, "maxProperties": jsObject, "dependencies": jsObject,
			"dependentRequired": jsObject, "dependentSchemas": jsObject, "unevaluatedProperties": jsObject,
			"items": jsArray, "additionalItems": jsArray, "prefixItems": jsArray, "minItems": jsArray, "maxItems": jsArray, "uniqueItems": jsArray,
			"minLength": jsString, "maxLength": jsString, "pattern": jsString,
			"minimum": jsNumber, "maximum": jsNumber, "exclusiveMinimum": jsNumber, "exclusiveMaximum": jsNumber, "multipleOf": jsNumber,
		} {
			if _, ok := v[k]; ok {
				return kd
			}
		}
		return jsEmpty
	}
	return jsEmpty
}

// typedEnum: an enum (or const) beside a type, which Confluent's model reads as the
// product of the two (allOf).
func typedEnum(m map[string]any) bool {
	_, e := m["enum"]
	_, c := m["const"]
	_, t := m["type"]
	return (e || c) && t
}

// branches is combined(s), once per schema of a check (the duplicates are found by
// deep comparison, which is not cheap on large schemas).
func (cx *jsonCompat) branches(s any) (string, []any) {
	p := ptr(s)
	if e, ok := cx.split[p]; ok && p != 0 {
		return e.crit, e.bs
	}
	crit, bs := combined(s)
	if p != 0 {
		cx.split[p] = splitEntry{s: s, crit: crit, bs: bs}
	}
	return crit, bs
}

// splitEntry is a combined schema's branches, holding the schema (see memoEntry).
type splitEntry struct {
	s    any
	crit string
	bs   []any
}

// combined answers a combined schema's criterion and branches.
func combined(s any) (string, []any) {
	m := s.(map[string]any)
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if bs, ok := m[k].([]any); ok {
			return k, dedupe(bs)
		}
	}
	if typedEnum(m) {
		typed := make(map[string]any, len(m))
		values := map[string]any{}
		for k, v := range m {
			if k == "enum" || k == "const" {
				values[k] = v
			} else {
				typed[k] = v
			}
		}
		return "allOf", []any{typed, values}
	}
	ts := m["type"].([]any)
	out := make([]any, 0, len(ts))
	for _, t := range ts {
		b := make(map[string]any, len(m))
		for k, v := range m {
			b[k] = v
		}
		b["type"] = t
		out = append(out, b)
	}
	return "anyOf", dedupe(out)
}

func dedupe(bs []any) []any {
	var out []any
outer:
	for _, b := range bs {
		for _, o := range out {
			if reflect.DeepEqual(o, b) {
				continue outer
			}
		}
		out = append(out, b)
	}
	return out
}

func ptr(s any) uintptr {
	if m, ok := s.(map[string]any); ok {
		return reflect.ValueOf(m).Pointer()
	}
	return 0
}

// compare records what makes data valid under orig invalid under upd.
func (cx *jsonCompat) compare(path string, orig, upd any) {
	if *cx.budget--; *cx.budget < 0 || cx.depth > 64 {
		return
	}
	cx.depth++
	defer func() { cx.depth-- }()
	orig, upd = cx.resolve(cx.orig, orig), cx.resolve(cx.upd, upd)
	if orig == nil || upd == nil {
		if orig != nil || upd != nil {
			cx.bad(path, "a reference does not resolve")
		}
		return
	}
	po, pu := ptr(orig), ptr(upd)
	orig, upd = draft2020(orig), draft2020(upd)
	ko, ku := kind(orig), kind(upd)
	if ko != jsCombined && ku == jsCombined {
		crit, bs := cx.branches(upd)
		if len(bs) == 1 || crit != "allOf" {
			for i, b := range bs {
				if cx.try(fmt.Sprintf("%s/%s/%d", path, crit, i), orig, b) {
					return // the update's union holds the original
				}
			}
		}
	} else if ko == jsCombined && ku != jsCombined {
		crit, bs := cx.branches(orig)
		if len(bs) == 1 || crit == "allOf" {
			for _, b := range bs {
				if cx.try(path, b, upd) {
					return // the update keeps a branch of the original's product
				}
			}
		}
	}
	if ko != ku {
		if ko == jsFalse || ku == jsEmpty {
			return
		}
		cx.bad(path, fmt.Sprintf("type changed from %s to %s", ko, ku))
		return
	}
	key := [2]uintptr{po, pu}
	if key[0] != 0 && key[1] != 0 {
		if cx.seen[key] {
			return
		}
		cx.seen[key] = true
		defer delete(cx.seen, key)
	}
	om, _ := orig.(map[string]any)
	um, _ := upd.(map[string]any)
	switch ko {
	case jsString:
		cx.bound(path, "maxLength", om, um, true)
		cx.bound(path, "minLength", om, um, false)
		if op, up := om["pattern"], um["pattern"]; up != nil && op != up {
			cx.bad(path+"/pattern", "pattern added or changed")
		}
	case jsNumber:
		cx.bound(path, "maximum", om, um, true)
		cx.bound(path, "minimum", om, um, false)
		cx.bound(path, "exclusiveMaximum", om, um, true)
		cx.bound(path, "exclusiveMinimum", om, um, false)
		cx.multipleOf(path, om, um)
		if om["type"] != "integer" && um["type"] == "integer" {
			cx.bad(path, "type narrowed from number to integer")
		}
	case jsEnum:
		ov, uv := enumValues(om), enumValues(um)
		for _, o := range ov {
			if !containsJSON(uv, o) {
				cx.bad(path+"/enum", "enum narrowed or changed: "+jsonText(o)+" is gone")
				break
			}
		}
	case jsCombined:
		cx.combined(path, orig, upd)
	case jsNot:
		// The update may refuse less: what it refuses must be refused by the original.
		if !cx.try(path+"/not", um["not"], om["not"]) {
			cx.bad(path+"/not", "not extended: the new schema refuses what the old accepted")
		}
	case jsObject:
		cx.object(path, om, um)
	case jsArray:
		cx.array(path, om, um)
	}
}

// bound compares a limit: an upper one (max) may rise or go, a lower one fall or go;
// adding one, or moving it the other way, refuses data the original accepted.
func (cx *jsonCompat) bound(path, key string, om, um map[string]any, upper bool) {
	ov, oOK := number(om[key])
	uv, uOK := number(um[key])
	switch {
	case !uOK:
		return // removed or never there
	case !oOK:
		cx.bad(path+"/"+key, key+" added")
	case upper && uv.Cmp(ov) < 0:
		cx.bad(path+"/"+key, key+" decreased")
	case !upper && uv.Cmp(ov) > 0:
		cx.bad(path+"/"+key, key+" increased")
	}
}

func (cx *jsonCompat) multipleOf(path string, om, um map[string]any) {
	ov, oOK := number(om["multipleOf"])
	uv, uOK := number(um["multipleOf"])
	switch {
	case !uOK || (oOK && ov.Cmp(uv) == 0):
	case !oOK:
		cx.bad(path+"/multipleOf", "multipleOf added")
	default:
		// Compatible when the old multiple is a multiple of the new (reduced).
		q := new(big.Rat).Quo(ov, uv)
		if !q.IsInt() {
			cx.bad(path+"/multipleOf", "multipleOf changed")
		}
	}
}

func number(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(n.String())
	return r, ok
}

func enumValues(m map[string]any) []any {
	if c, ok := m["const"]; ok {
		return []any{c}
	}
	vs, _ := m["enum"].([]any)
	return vs
}

func containsJSON(vs []any, v any) bool {
	t := jsonText(v)
	for _, x := range vs {
		if jsonText(x) == t {
			return true
		}
	}
	return false
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// combined compares two allOf/anyOf/oneOf: the criterion may widen (to anyOf; a
// singleton to oneOf), a sum may gain branches and a product lose them, and the
// branches must match one to one (each original branch compatible with its own
// update branch) as far as the smaller side goes.
func (cx *jsonCompat) combined(path string, orig, upd any) {
	oc, obs := cx.branches(orig)
	uc, ubs := cx.branches(upd)
	if oc != uc {
		ok := uc == "anyOf" || (len(obs) == 1 && len(ubs) == 1) || (len(obs) == 1 && uc == "oneOf") || (len(ubs) == 1 && oc == "allOf")
		if !ok {
			cx.bad(path, "combined type changed from "+oc+" to "+uc)
			return
		}
	}
	switch {
	case len(obs) < len(ubs) && uc == "allOf":
		cx.bad(path, "allOf extended: the new schema requires more")
	case len(obs) > len(ubs) && oc != "allOf":
		cx.bad(path, oc+" narrowed: a branch is gone")
	}
	edges := make([][]int, len(obs))
	for i, o := range obs {
		for j, u := range ubs {
			if cx.try(fmt.Sprintf("%s/%s/%d", path, oc, i), o, u) {
				edges[i] = append(edges[i], j)
			}
		}
	}
	if matched := maxMatching(edges, len(ubs)); matched < min(len(obs), len(ubs)) {
		cx.bad(path, oc+" branches changed: no one-to-one match of compatible branches")
	}
}

// maxMatching is the size of a maximum bipartite matching (augmenting paths).
func maxMatching(edges [][]int, right int) int {
	owner := make([]int, right)
	for i := range owner {
		owner[i] = -1
	}
	var augment func(i int, seen []bool) bool
	augment = func(i int, seen []bool) bool {
		for _, j := range edges[i] {
			if seen[j] {
				continue
			}
			seen[j] = true
			if owner[j] < 0 || augment(owner[j], seen) {
				owner[j] = i
				return true
			}
		}
		return false
	}
	n := 0
	for i := range edges {
		if augment(i, make([]bool, right)) {
			n++
		}
	}
	return n
}

// object compares objects under Confluent's content models.
func (cx *jsonCompat) object(path string, om, um map[string]any) {
	oprops, _ := om["properties"].(map[string]any)
	uprops, _ := um["properties"].(map[string]any)
	oreq, ureq := stringSet(om["required"]), stringSet(um["required"])
	for k := range oprops {
		if us, ok := uprops[k]; ok && !oreq[k] && ureq[k] && !hasDefault(us) {
			cx.bad(path+"/required/"+k, "property "+k+" made required without a default")
		}
	}
	for _, k := range unionKeys(oprops, uprops) {
		p := path + "/properties/" + k
		os, inO := oprops[k]
		us, inU := uprops[k]
		switch {
		case inO && inU:
			cx.compare(p, os, us)
		case inO: // removed
			if openModel(um) {
				continue
			}
			if partial := partialSchema(um, k); partial != nil {
				if !cx.try(p, os, partial) {
					cx.bad(p, "property "+k+" removed, and what the new schema's pattern or additional properties allow does not cover it")
				}
			} else if os != false {
				cx.bad(p, "property "+k+" removed from a closed content model")
			}
		default: // added
			if openModel(om) {
				if kind(us) != jsEmpty {
					cx.bad(p, "property "+k+" added to an open content model (the old schema let it hold anything)")
				}
				continue
			}
			if partial := partialSchema(om, k); partial != nil && !cx.try(p, partial, us) {
				cx.bad(p, "property "+k+" added, and what the old schema's pattern or additional properties allowed it does not cover")
			}
			if ureq[k] && !hasDefault(us) {
				cx.bad(p, "required property "+k+" added without a default")
			}
		}
	}
	odeps, _ := om["dependencies"].(map[string]any)
	udeps, _ := um["dependencies"].(map[string]any)
	for _, k := range unionKeys(odeps, udeps) {
		p := path + "/dependencies/" + k
		od, inO := odeps[k]
		ud, inU := udeps[k]
		oa, oArr := od.([]any)
		ua, uArr := ud.([]any)
		switch {
		case !inU:
		case !inO:
			cx.bad(p, "dependency added")
		case oArr && uArr:
			os, us := stringSet(oa), stringSet(ua)
			for x := range us {
				if !os[x] {
					cx.bad(p, "dependency array extended or changed")
					break
				}
			}
		case !oArr && !uArr:
			cx.compare(p, od, ud)
		default:
			cx.bad(p, "dependency changed between an array and a schema")
		}
	}
	p := path + "/additionalProperties"
	if permits(om) != permits(um) {
		if !permits(um) {
			cx.bad(p, "additional properties removed")
		}
	} else {
		os, us := additionalSchema(om), additionalSchema(um)
		switch {
		case os == nil && us != nil:
			cx.bad(p, "additional properties narrowed to a schema")
		case os != nil && us != nil:
			cx.compare(p, os, us)
		}
	}
	cx.bound(path, "maxProperties", om, um, true)
	cx.bound(path, "minProperties", om, um, false)
}

func (cx *jsonCompat) array(path string, om, um map[string]any) {
	oi, ui := om["items"], um["items"]
	ot, oTuple := oi.([]any)
	ut, uTuple := ui.([]any)
	// One schema for every item.
	switch {
	case oTuple || uTuple || ui == nil:
		if !oTuple && oi != nil && ui == nil {
			break // removed: anything goes
		}
		if !uTuple && ui != nil {
			cx.bad(path+"/items", "items schema added")
		}
	case oi == nil:
		cx.bad(path+"/items", "items schema added")
	default:
		cx.compare(path+"/items", oi, ui)
	}
	// Tuples, position by position, under the content models of additionalItems.
	for i := range min(len(ot), len(ut)) {
		cx.compare(fmt.Sprintf("%s/items/%d", path, i), ot[i], ut[i])
	}
	for i := len(ut); i < len(ot); i++ { // removed from the update's tuple
		p := fmt.Sprintf("%s/items/%d", path, i)
		switch {
		case openItems(um):
		case additionalItemsSchema(um) != nil:
			if !cx.try(p, ot[i], additionalItemsSchema(um)) {
				cx.bad(p, "tuple item removed, and the new schema's additionalItems does not cover it")
			}
		case ot[i] != false:
			cx.bad(p, "tuple item removed from a closed content model")
		}
	}
	for i := len(ot); i < len(ut); i++ { // added to the update's tuple
		p := fmt.Sprintf("%s/items/%d", path, i)
		switch {
		case openItems(om):
			if kind(ut[i]) != jsEmpty {
				cx.bad(p, "tuple item added to an open content model (the old schema let it hold anything)")
			}
		case additionalItemsSchema(om) != nil:
			if !cx.try(p, additionalItemsSchema(om), ut[i]) {
				cx.bad(p, "tuple item added, and the old schema's additionalItems does not cover it")
			}
		}
	}
	p := path + "/additionalItems"
	if om["additionalItems"] != false && um["additionalItems"] == false {
		cx.bad(p, "additional items removed")
	} else if om["additionalItems"] != false || um["additionalItems"] != false {
		os, us := additionalItemsSchema(om), additionalItemsSchema(um)
		switch {
		case os == nil && us != nil && om["additionalItems"] != false:
			cx.bad(p, "additional items narrowed to a schema")
		case os != nil && us != nil:
			cx.compare(p, os, us)
		}
	}
	cx.bound(path, "maxItems", om, um, true)
	cx.bound(path, "minItems", om, um, false)
	cx.bound(path, "maxContains", om, um, true)
	cx.bound(path, "minContains", om, um, false)
	if om["uniqueItems"] != true && um["uniqueItems"] == true {
		cx.bad(path+"/uniqueItems", "uniqueItems added")
	}
}

// additionalItemsSchema is additionalItems when it is a schema (an object).
func additionalItemsSchema(m map[string]any) any {
	if s, ok := m["additionalItems"].(map[string]any); ok {
		return s
	}
	return nil
}

// openItems: any item may follow the tuple, holding anything.
func openItems(m map[string]any) bool {
	return m["additionalItems"] != false && additionalItemsSchema(m) == nil
}

func hasDefault(s any) bool {
	m, ok := s.(map[string]any)
	if !ok {
		return false
	}
	_, ok = m["default"]
	return ok
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	vs, _ := v.([]any)
	for _, x := range vs {
		if s, ok := x.(string); ok {
			out[s] = true
		}
	}
	return out
}

func unionKeys(a, b map[string]any) []string {
	out := make([]string, 0, len(a)+len(b))
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// permits: additional properties are allowed (not false).
func permits(m map[string]any) bool { return m["additionalProperties"] != false }

// additionalSchema is additionalProperties when it is a schema (an object).
func additionalSchema(m map[string]any) any {
	if s, ok := m["additionalProperties"].(map[string]any); ok {
		return s
	}
	return nil
}

// openModel: any property may appear, holding anything.
func openModel(m map[string]any) bool {
	pp, _ := m["patternProperties"].(map[string]any)
	return len(pp) == 0 && additionalSchema(m) == nil && permits(m)
}

// partialSchema is what a partially open model allows property k to hold: the first
// matching patternProperties schema, else the additionalProperties schema; nil when
// neither.
func partialSchema(m map[string]any, k string) any {
	pp, _ := m["patternProperties"].(map[string]any)
	pats := make([]string, 0, len(pp))
	for p := range pp {
		pats = append(pats, p)
	}
	slices.Sort(pats)
	for _, p := range pats {
		if re, err := regexp.Compile(p); err == nil && re.MatchString(k) {
			return pp[p]
		}
	}
	return additionalSchema(m)
}
