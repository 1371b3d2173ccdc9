package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/sr"
)

// The schema registry verbs (schemas register|get|list|check), over the registry's
// REST API (Confluent's, served by every node) with franz-go's registry client, the
// same client a serializer would use.

func schemaVerbs() []verb {
	return []verb{
		{"schemas register", schemasRegisterCommand},
		{"schemas get", schemasGetCommand},
		{"schemas list", schemasListCommand},
		{"schemas check", schemasCheckCommand},
	}
}

// registryClient is a registry client for the server the global flags name.
func registryClient(sf *serverFlags, cmd string) (*sr.Client, error) {
	if _, err := sf.client(cmd); err != nil { // the same checks of --server and --timeout
		return nil, err
	}
	opts := []sr.ClientOpt{sr.URLs(sf.server), sr.UserAgent("strata-cli/" + strings.Fields(versionString())[0])}
	if sf.apiKey != "" {
		opts = append(opts, sr.BearerToken(sf.apiKey))
	}
	return sr.NewClient(opts...)
}

// schemaFlags read a schema from --file or --schema.
type schemaFlags struct {
	file, text, typ string
}

func addSchemaFlags(c *command) *schemaFlags {
	f := &schemaFlags{}
	c.fs.StringVar(&f.file, "file", "", "read the schema from `path` (- for stdin)")
	c.fs.StringVar(&f.text, "schema", "", "the schema `text` itself")
	c.fs.StringVar(&f.typ, "type", "AVRO", "the schema's `type`: AVRO, JSON (JSON Schema) or PROTOBUF")
	return f
}

func (f *schemaFlags) schema(e *env, cmd string) (sr.Schema, error) {
	text := f.text
	switch {
	case f.file != "" && f.text != "":
		return sr.Schema{}, usagef(cmd, "give the schema once: --file PATH or --schema TEXT")
	case f.file == "-":
		b, err := readAllLimited(e.stdin)
		if err != nil {
			return sr.Schema{}, err
		}
		text = string(b)
	case f.file != "":
		b, err := os.ReadFile(f.file)
		if err != nil {
			return sr.Schema{}, fmt.Errorf("%s: read the schema: %w", cmd, err)
		}
		text = string(b)
	case text == "":
		return sr.Schema{}, usagef(cmd, "give the schema: --file PATH (- for stdin) or --schema TEXT")
	}
	s := sr.Schema{Schema: text}
	switch t := strings.ToUpper(f.typ); t {
	case "AVRO":
	case "PROTOBUF", "JSON":
		s.Type = map[string]sr.SchemaType{"PROTOBUF": sr.TypeProtobuf, "JSON": sr.TypeJSON}[t]
	default:
		return sr.Schema{}, usagef(cmd, "--type %q: want AVRO, PROTOBUF or JSON", f.typ)
	}
	return s, nil
}

func readAllLimited(r interface{ Read([]byte) (int, error) }) ([]byte, error) {
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		b.Write(buf[:n])
		if b.Len() > 1<<20 {
			return nil, errors.New("the schema on stdin is larger than 1 MiB")
		}
		if err != nil {
			return []byte(b.String()), nil
		}
	}
}

func oneSubject(cmd string, args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", usagef(cmd, "missing the subject: strata %s SUBJECT (a topic's values: TOPIC-value)", cmd)
	case 1:
		return args[0], nil
	default:
		return "", usagef(cmd, "one subject expected, got %d arguments (%s)", len(args), strings.Join(args, " "))
	}
}

// registryErr says a registry refusal in its own words.
func registryErr(cmd string, err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return fmt.Errorf("%s: %s (error_code %d)", cmd, re.Message, re.ErrorCode)
	}
	return fmt.Errorf("%s: %w", cmd, err)
}

func schemasRegisterCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("schemas register", "strata schemas register SUBJECT (--file PATH | --schema TEXT) [--type AVRO|JSON|PROTOBUF] [--json]",
		"Registers a schema under a subject (TOPIC-value for a topic's values) and prints its id and\nversion. Registering a schema the subject holds answers its id again; one that breaks the\nsubject's compatibility level is refused with the reasons.")
	sf := addServerFlags(c)
	f := addSchemaFlags(c)
	asJSON := c.fs.Bool("json", false, "print the result as JSON")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		subject, err := oneSubject(c.name, args)
		if err != nil {
			return err
		}
		s, err := f.schema(e, c.name)
		if err != nil {
			return err
		}
		cl, err := registryClient(sf, c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		ss, err := cl.CreateSchema(ctx, subject, s)
		if err != nil {
			return registryErr(c.name, err)
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(map[string]any{"subject": ss.Subject, "version": ss.Version, "id": ss.ID})
		}
		fmt.Fprintf(e.stdout, "subject %s version %d: schema id %d\n", ss.Subject, ss.Version, ss.ID)
		return nil
	}
}

func schemasGetCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("schemas get", "strata schemas get (SUBJECT [--version N|latest] | --id ID) [--json]",
		"Prints a schema: a subject's version (the latest by default), or a schema by its id.\nWith --json, the registry's answer whole (subject, version, id, references).")
	sf := addServerFlags(c)
	version := c.fs.String("version", "latest", "the `version`: a number or latest")
	id := c.fs.Int("id", 0, "get the schema with this `id` instead")
	asJSON := c.fs.Bool("json", false, "print the registry's answer as JSON")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		cl, err := registryClient(sf, c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		if *id != 0 {
			if len(args) > 0 {
				return usagef(c.name, "give a subject or --id, not both")
			}
			s, err := cl.SchemaByID(ctx, *id)
			if err != nil {
				return registryErr(c.name, err)
			}
			if *asJSON {
				return json.NewEncoder(e.stdout).Encode(s)
			}
			fmt.Fprintln(e.stdout, s.Schema)
			return nil
		}
		subject, err := oneSubject(c.name, args)
		if err != nil {
			return err
		}
		v := -1
		if *version != "latest" {
			if _, err := fmt.Sscan(*version, &v); err != nil {
				return usagef(c.name, "--version %q: want a number or latest", *version)
			}
		}
		ss, err := cl.SchemaByVersion(ctx, subject, v)
		if err != nil {
			return registryErr(c.name, err)
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(ss)
		}
		fmt.Fprintln(e.stdout, ss.Schema.Schema)
		return nil
	}
}

func schemasListCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("schemas list", "strata schemas list [--prefix P] [--deleted] [--json]",
		"Lists the subjects with their latest version and its schema id.")
	sf := addServerFlags(c)
	prefix := c.fs.String("prefix", "", "only subjects starting with `text`")
	deleted := c.fs.Bool("deleted", false, "include soft-deleted subjects")
	asJSON := c.fs.Bool("json", false, "print one JSON object per subject")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		cl, err := registryClient(sf, c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		params := []sr.Param{sr.LatestOnly}
		if *prefix != "" {
			params = append(params, sr.SubjectPrefix(*prefix))
		}
		if *deleted {
			params = append(params, sr.ShowDeleted)
		}
		ss, err := cl.AllSchemas(sr.WithParams(ctx, params...))
		if err != nil {
			return registryErr(c.name, err)
		}
		if *asJSON {
			for _, s := range ss {
				if err := json.NewEncoder(e.stdout).Encode(map[string]any{"subject": s.Subject, "version": s.Version, "id": s.ID, "type": typeName(s.Type)}); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SUBJECT\tVERSION\tID\tTYPE")
		for _, s := range ss {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", s.Subject, s.Version, s.ID, typeName(s.Type))
		}
		return tw.Flush()
	}
}

func typeName(t sr.SchemaType) string {
	switch t {
	case sr.TypeProtobuf:
		return "PROTOBUF"
	case sr.TypeJSON:
		return "JSON"
	}
	return "AVRO"
}

// errIncompatible ends schemas check with exit status 1 once it has said why.
var errIncompatible = errors.New("incompatible")

func schemasCheckCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("schemas check", "strata schemas check SUBJECT (--file PATH | --schema TEXT) [--type AVRO|JSON|PROTOBUF] [--version N|latest|all]",
		"Checks whether a schema may be registered under a subject, against its latest version (or\none, or all) under the subject's compatibility level, without registering it. Prints\n\"compatible\", or \"incompatible\" and the reasons and exits with status 1.")
	sf := addServerFlags(c)
	f := addSchemaFlags(c)
	version := c.fs.String("version", "latest", "check against `version`: a number, latest, or all")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		subject, err := oneSubject(c.name, args)
		if err != nil {
			return err
		}
		s, err := f.schema(e, c.name)
		if err != nil {
			return err
		}
		v := -1
		switch *version {
		case "latest":
		case "all":
			v = -2
		default:
			if _, err := fmt.Sscan(*version, &v); err != nil || v <= 0 {
				return usagef(c.name, "--version %q: want a number, latest or all", *version)
			}
		}
		cl, err := registryClient(sf, c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		res, err := cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), subject, v, s)
		if err != nil {
			return registryErr(c.name, err)
		}
		if res.Is {
			fmt.Fprintln(e.stdout, "compatible")
			return nil
		}
		fmt.Fprintln(e.stdout, "incompatible")
		for _, m := range res.Messages {
			fmt.Fprintln(e.stdout, "  "+m)
		}
		return errIncompatible
	}
}
