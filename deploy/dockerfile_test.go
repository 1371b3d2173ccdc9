// Package deploy holds the tests of the deployment files: the Dockerfile (parsed, its
// build command run, the result started by environment alone and smoke-tested), the
// compose files and the smoke script.
package deploy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction after line continuations are joined.
type instruction struct {
	line  int               // where it starts, 1-based
	cmd   string            // upper case: FROM, RUN, ...
	flags map[string]string // leading --name=value flags (RUN --mount may repeat: joined by "\n")
	args  string            // the rest, shell form
	exec  []string          // the JSON (exec) form, when the rest is one
}

// stage is a FROM and the instructions after it.
type stage struct {
	image, name string
	from        instruction
	body        []instruction
}

// dockerfile is a parsed Dockerfile.
type dockerfile struct {
	globalArgs []instruction // ARGs before the first FROM
	stages     []stage
}

// parseDockerfile parses the subset of the Dockerfile syntax this project uses, and
// refuses what it does not understand rather than misread it: parser directives
// (syntax; escape only as the default backslash), comments, backslash line
// continuations, flags, and shell or JSON forms. Heredocs are refused.
func parseDockerfile(src string) (*dockerfile, error) {
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	df := &dockerfile{}
	directives := true
	var cur strings.Builder
	start := 0
	flush := func() error {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return nil
		}
		ins, err := parseInstruction(start, text)
		if err != nil {
			return err
		}
		switch {
		case ins.cmd == "FROM":
			f := strings.Fields(ins.args)
			st := stage{from: ins}
			switch {
			case len(f) == 1:
				st.image = f[0]
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				st.image, st.name = f[0], f[2]
			default:
				return fmt.Errorf("line %d: FROM %q: want IMAGE [AS NAME]", start, ins.args)
			}
			df.stages = append(df.stages, st)
		case len(df.stages) == 0:
			if ins.cmd != "ARG" {
				return fmt.Errorf("line %d: %s before the first FROM", start, ins.cmd)
			}
			df.globalArgs = append(df.globalArgs, ins)
		default:
			last := &df.stages[len(df.stages)-1]
			last.body = append(last.body, ins)
		}
		return nil
	}
	for i, raw := range lines {
		trimmed := strings.TrimSpace(raw)
		if directives {
			if m := directiveRE.FindStringSubmatch(trimmed); m != nil {
				if strings.EqualFold(m[1], "escape") && m[2] != `\` {
					return nil, fmt.Errorf("line %d: escape directive %q is not supported", i+1, m[2])
				}
				continue
			}
			directives = false
		}
		if strings.HasPrefix(trimmed, "#") {
			continue // a comment, also inside a continued instruction
		}
		if trimmed == "" {
			continue // blank lines, also inside a continued instruction (as Docker does)
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if body, ok := strings.CutSuffix(strings.TrimRight(raw, " \t"), `\`); ok {
			cur.WriteString(body)
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(raw)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("line %d: the file ends inside a continued instruction", start)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(df.stages) == 0 {
		return nil, fmt.Errorf("no FROM")
	}
	return df, nil
}

var (
	directiveRE   = regexp.MustCompile(`^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$`)
	instructionRE = regexp.MustCompile(`^([A-Za-z]+)(?:\s+(.*))?$`)
	known         = map[string]bool{"FROM": true, "RUN": true, "CMD": true, "LABEL": true, "EXPOSE": true, "ENV": true,
		"ADD": true, "COPY": true, "ENTRYPOINT": true, "VOLUME": true, "USER": true, "WORKDIR": true, "ARG": true,
		"ONBUILD": true, "STOPSIGNAL": true, "HEALTHCHECK": true, "SHELL": true}
)

func parseInstruction(line int, text string) (instruction, error) {
	m := instructionRE.FindStringSubmatch(text)
	if m == nil {
		return instruction{}, fmt.Errorf("line %d: %q is not an instruction", line, text)
	}
	ins := instruction{line: line, cmd: strings.ToUpper(m[1]), flags: map[string]string{}}
	if !known[ins.cmd] {
		return instruction{}, fmt.Errorf("line %d: unknown instruction %s", line, m[1])
	}
	rest := strings.TrimSpace(m[2])
	if ins.cmd == "RUN" || ins.cmd == "COPY" || ins.cmd == "ADD" || ins.cmd == "FROM" {
		for strings.HasPrefix(rest, "--") {
			tok, after, _ := strings.Cut(rest, " ")
			name, val, _ := strings.Cut(strings.TrimPrefix(tok, "--"), "=")
			if ins.flags[name] != "" {
				val = ins.flags[name] + "\n" + val
			}
			ins.flags[name] = val
			rest = strings.TrimSpace(after)
		}
	}
	if strings.Contains(rest, "<<") && (ins.cmd == "RUN" || ins.cmd == "COPY") {
		return instruction{}, fmt.Errorf("line %d: heredocs are not supported by this parser", line)
	}
	ins.args = rest
	if strings.HasPrefix(rest, "[") {
		var exec []string
		if err := json.Unmarshal([]byte(rest), &exec); err == nil {
			ins.exec = exec
		} else if ins.cmd == "CMD" || ins.cmd == "ENTRYPOINT" {
			return instruction{}, fmt.Errorf("line %d: %s looks like JSON but is not a string array: %v", line, ins.cmd, err)
		}
	}
	return ins, nil
}

// envPairs parses ENV's KEY=VALUE pairs (values may be double-quoted).
func envPairs(ins instruction) (map[string]string, error) {
	out := map[string]string{}
	rest := strings.TrimSpace(ins.args)
	for rest != "" {
		k, after, ok := strings.Cut(rest, "=")
		if !ok || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("line %d: ENV %q: want KEY=VALUE pairs", ins.line, ins.args)
		}
		var v string
		if strings.HasPrefix(after, `"`) {
			end := strings.Index(after[1:], `"`)
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated quote", ins.line)
			}
			v, rest = after[1:end+1], strings.TrimSpace(after[end+2:])
		} else {
			v, rest, _ = strings.Cut(after, " ")
			rest = strings.TrimSpace(rest)
		}
		out[k] = v
	}
	return out, nil
}

// expand substitutes $NAME, ${NAME} and ${NAME:-default} from vars; an unknown name
// is an error, so a build command is never run with a silently empty variable.
func expand(s string, vars map[string]string) (string, error) {
	var err error
	out := varRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := varRE.FindStringSubmatch(m)
		name, def, hasDef := sub[1], "", false
		if name == "" {
			name = sub[2]
			if n, d, ok := strings.Cut(name, ":-"); ok {
				name, def, hasDef = n, d, true
			}
		}
		if v, ok := vars[name]; ok && v != "" {
			return v
		}
		if hasDef {
			return def
		}
		err = fmt.Errorf("variable %s has no value", name)
		return m
	})
	return out, err
}

var varRE = regexp.MustCompile(`\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([^}]+)\})`)

func TestParseDockerfile(t *testing.T) {
	src := "# syntax=docker/dockerfile:1\n" +
		"# a comment\n" +
		"ARG V=1\n" +
		"FROM golang:${V} AS build\n" +
		"RUN --mount=type=cache,target=/a --mount=type=cache,target=/b \\\n" +
		"    # comment inside\n" +
		"    CGO_ENABLED=0 go build \\\n" +
		"    -o /out/x ./cmd/x\n" +
		"\n" +
		"FROM scratch\n" +
		"COPY --from=build /out/x /x\n" +
		"ENV A=1 B=\"two words\"\n" +
		"USER 65532:65532\n" +
		"ENTRYPOINT [\"/x\"]\n" +
		"CMD serve --flag\n"
	df, err := parseDockerfile(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(df.globalArgs) != 1 || df.globalArgs[0].args != "V=1" || len(df.stages) != 2 {
		t.Fatalf("parsed %+v", df)
	}
	if st := df.stages[0]; st.image != "golang:${V}" || st.name != "build" || len(st.body) != 1 {
		t.Fatalf("stage 0 %+v", st)
	}
	run := df.stages[0].body[0]
	if run.line != 5 || run.flags["mount"] != "type=cache,target=/a\ntype=cache,target=/b" ||
		strings.Join(strings.Fields(run.args), " ") != "CGO_ENABLED=0 go build -o /out/x ./cmd/x" {
		t.Errorf("RUN line %d flags %q args %q", run.line, run.flags, run.args)
	}
	final := df.stages[1].body
	if final[0].flags["from"] != "build" || final[0].args != "/out/x /x" {
		t.Errorf("COPY %+v", final[0])
	}
	if env, err := envPairs(final[1]); err != nil || env["A"] != "1" || env["B"] != "two words" {
		t.Errorf("ENV %v %v", env, err)
	}
	if final[3].exec == nil || final[3].exec[0] != "/x" || final[4].exec != nil || final[4].args != "serve --flag" {
		t.Errorf("ENTRYPOINT %+v CMD %+v", final[3], final[4])
	}
	if got, err := expand("a $V ${V} ${W:-dflt} ${V:-x}", map[string]string{"V": "1"}); err != nil || got != "a 1 1 dflt 1" {
		t.Errorf("expand = %q, %v", got, err)
	}
	if _, err := expand("$NOPE", nil); err == nil {
		t.Error("expand of an unknown variable: no error")
	}

	for _, bad := range []string{
		"RUN x\n",                         // before FROM
		"FROM a\nRUN <<EOF\nx\nEOF\n",     // heredoc
		"# escape=`\nFROM a\n",            // another escape character
		"FROM a\nRUN x \\\n",              // ends inside a continuation
		"FROM a b c d\n",                  // malformed FROM
		"FROM a\nFROBNICATE x\n",          // unknown instruction
		"FROM a\nCMD [\"unterminated\"\n", // broken JSON form
		"",
	} {
		if _, err := parseDockerfile(bad); err == nil {
			t.Errorf("parseDockerfile(%q): no error", bad)
		}
	}
}
