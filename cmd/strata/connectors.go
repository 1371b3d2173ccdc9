package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
)

// The connector verbs (strata connectors ...): thin over Kafka Connect's REST API, which
// a node with the connect role serves under /connectors and /connector-plugins.

func connectorVerbs() []verb {
	return []verb{
		{"connectors list", connectorsListCommand},
		{"connectors create", func() (*command, func(context.Context, *env, *command, []string) error) {
			return connectorsPutCommand(true)
		}},
		{"connectors update", func() (*command, func(context.Context, *env, *command, []string) error) {
			return connectorsPutCommand(false)
		}},
		{"connectors describe", connectorsDescribeCommand},
		{"connectors pause", func() (*command, func(context.Context, *env, *command, []string) error) {
			return connectorsActionCommand("pause", "PUT", "/pause", "Pauses a connector's tasks; they keep their place.")
		}},
		{"connectors resume", func() (*command, func(context.Context, *env, *command, []string) error) {
			return connectorsActionCommand("resume", "PUT", "/resume", "Resumes a paused or stopped connector.")
		}},
		{"connectors stop", func() (*command, func(context.Context, *env, *command, []string) error) {
			return connectorsActionCommand("stop", "PUT", "/stop", "Stops a connector: its tasks are shut down and fenced; its config stays. Offsets can be edited only while stopped.")
		}},
		{"connectors delete", func() (*command, func(context.Context, *env, *command, []string) error) {
			return connectorsActionCommand("delete", "DELETE", "", "Deletes a connector and its tasks. A source connector's offsets stay (as in Kafka Connect).")
		}},
		{"connectors restart", connectorsRestartCommand},
		{"connectors offsets", connectorsOffsetsCommand},
		{"connectors plugins", connectorsPluginsCommand},
		{"connectors validate", connectorsValidateCommand},
	}
}

// connectCall sends one REST request and decodes a 2xx answer into out; an error answer
// becomes an error carrying Kafka Connect's message.
func connectCall(ctx context.Context, sf *serverFlags, cmd, method, path string, body, out any) error {
	if _, err := sf.client(cmd); err != nil { // checks --server and --timeout
		return err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, sf.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(sf.server, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if sf.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+sf.apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e struct {
			Code    int    `json:"error_code"`
			Message string `json:"message"`
			Detail  string `json:"detail"`
		}
		if json.Unmarshal(b, &e) == nil && (e.Message != "" || e.Detail != "") {
			return fmt.Errorf("%s %s: %d: %s%s", method, path, resp.StatusCode, e.Message, e.Detail)
		}
		return fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

func oneConnector(cmd string, args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", usagef(cmd, "missing the connector name: strata %s NAME", cmd)
	case 1:
		return url.PathEscape(args[0]), nil
	}
	return "", usagef(cmd, "one connector name expected, got %d arguments (%s)", len(args), strings.Join(args, " "))
}

// readConfig reads a config file: a JSON object, or properties (KEY=VALUE lines).
func readConfig(path string, stdin io.Reader) (map[string]string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		var m map[string]any
		if err := json.Unmarshal(t, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out := map[string]string{}
		for k, v := range m {
			if s, ok := v.(string); ok {
				out[k] = s
			} else {
				out[k] = strings.Trim(fmt.Sprint(v), " ")
			}
		}
		return out, nil
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want KEY=VALUE", path, n)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// configFlags are --config KEY=VALUE (repeated) and --config-file FILE, the flags winning.
type configFlags struct {
	kv   stringList
	file *string
}

func addConfigFlags(c *command) *configFlags {
	f := &configFlags{}
	c.fs.Var(&f.kv, "config", "connector config as `KEY=VALUE`; repeat for several")
	f.file = c.fs.String("config-file", "", "`file` of config: a JSON object or KEY=VALUE lines (- for stdin)")
	return f
}

func (f *configFlags) read(cmd string, stdin io.Reader) (map[string]string, error) {
	cfg := map[string]string{}
	if *f.file != "" {
		m, err := readConfig(*f.file, stdin)
		if err != nil {
			return nil, usagef(cmd, "--config-file: %v", err)
		}
		cfg = m
	}
	kv, err := keyValues(f.kv.vals, "config")
	if err != nil {
		return nil, usagef(cmd, "%v", err)
	}
	for k, v := range kv {
		cfg[k] = v
	}
	if len(cfg) == 0 {
		return nil, usagef(cmd, "no config: give --config KEY=VALUE or --config-file FILE (connector.class at least)")
	}
	return cfg, nil
}

type connectorStatus struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Connector struct {
		State    string `json:"state"`
		WorkerID string `json:"worker_id"`
	} `json:"connector"`
	Tasks []struct {
		ID       int    `json:"id"`
		State    string `json:"state"`
		WorkerID string `json:"worker_id"`
		Trace    string `json:"trace"`
	} `json:"tasks"`
}

func connectorsListCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("connectors list", "strata connectors list [--json]", "Lists the connectors with their type, state and running tasks.")
	sf := addServerFlags(c)
	asJSON := c.fs.Bool("json", false, "print Kafka Connect's ?expand=status,info answer")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		var all map[string]struct {
			Status connectorStatus `json:"status"`
			Info   struct {
				Config map[string]string `json:"config"`
			} `json:"info"`
		}
		if err := connectCall(ctx, sf, c.name, "GET", "/connectors?expand=status&expand=info", nil, &all); err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(all)
		}
		names := make([]string, 0, len(all))
		for n := range all {
			names = append(names, n)
		}
		sort.Strings(names)
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tTYPE\tSTATE\tTASKS RUNNING\tCLASS")
		for _, n := range names {
			s := all[n].Status
			running := 0
			for _, t := range s.Tasks {
				if t.State == "RUNNING" {
					running++
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\n", n, s.Type, s.Connector.State, running, len(s.Tasks), all[n].Info.Config["connector.class"])
		}
		return tw.Flush()
	}
}

func connectorsPutCommand(create bool) (*command, func(context.Context, *env, *command, []string) error) {
	name, synopsis, about := "connectors update", "strata connectors update NAME [--config KEY=VALUE ...] [--config-file FILE]",
		"Replaces a connector's config (creating the connector if it does not exist); its tasks restart with it."
	if create {
		name, synopsis, about = "connectors create", "strata connectors create NAME [--config KEY=VALUE ...] [--config-file FILE] [--state RUNNING|PAUSED|STOPPED]",
			"Creates a connector. The config names its connector.class (strata connectors plugins) and its\nkeys (strata connectors validate). ${env:NAME} and ${file:PATH:KEY} resolve on the workers, if\nthe operator allows them there."
	}
	c := newCommand(name, synopsis, about)
	sf := addServerFlags(c)
	cf := addConfigFlags(c)
	var state *string
	if create {
		state = c.fs.String("state", "", "initial `state`: RUNNING (default), PAUSED or STOPPED")
	}
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		conn, err := oneConnector(c.name, args)
		if err != nil {
			return err
		}
		cfg, err := cf.read(c.name, e.stdin)
		if err != nil {
			return err
		}
		var info struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Tasks []any  `json:"tasks"`
		}
		if create {
			body := map[string]any{"name": args[0], "config": cfg}
			if *state != "" {
				body["initial_state"] = strings.ToUpper(*state)
			}
			err = connectCall(ctx, sf, c.name, "POST", "/connectors", body, &info)
		} else {
			err = connectCall(ctx, sf, c.name, "PUT", "/connectors/"+conn+"/config", cfg, &info)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "connector %s (%s): %d task(s)\n", info.Name, info.Type, len(info.Tasks))
		return nil
	}
}

func connectorsDescribeCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("connectors describe", "strata connectors describe NAME [--json]",
		"Shows a connector's state, each task's state and worker (with the trace of a failed task),\nand its config (secrets hidden).")
	sf := addServerFlags(c)
	asJSON := c.fs.Bool("json", false, "print {\"status\":...,\"config\":...} as JSON")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		conn, err := oneConnector(c.name, args)
		if err != nil {
			return err
		}
		var st connectorStatus
		var cfg map[string]string
		if err := connectCall(ctx, sf, c.name, "GET", "/connectors/"+conn+"/status", nil, &st); err != nil {
			return err
		}
		if err := connectCall(ctx, sf, c.name, "GET", "/connectors/"+conn+"/config", nil, &cfg); err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(map[string]any{"status": st, "config": cfg})
		}
		fmt.Fprintf(e.stdout, "Connector: %s (%s)\nState:     %s on %s\n\n", st.Name, st.Type, st.Connector.State, st.Connector.WorkerID)
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tSTATE\tWORKER")
		for _, t := range st.Tasks {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", t.ID, t.State, t.WorkerID)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, t := range st.Tasks {
			if t.Trace != "" {
				fmt.Fprintf(e.stdout, "\nTask %d failed:\n%s\n", t.ID, t.Trace)
			}
		}
		keys := make([]string, 0, len(cfg))
		for k := range cfg {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintln(e.stdout, "\nConfig:")
		for _, k := range keys {
			fmt.Fprintf(e.stdout, "  %s=%s\n", k, cfg[k])
		}
		return nil
	}
}

func connectorsActionCommand(verb, method, suffix, about string) (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("connectors "+verb, "strata connectors "+verb+" NAME", about)
	sf := addServerFlags(c)
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		conn, err := oneConnector(c.name, args)
		if err != nil {
			return err
		}
		if err := connectCall(ctx, sf, c.name, method, "/connectors/"+conn+suffix, nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "connector %s: %s\n", args[0], verb)
		return nil
	}
}

func connectorsRestartCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("connectors restart", "strata connectors restart NAME [--include-tasks] [--only-failed] [--task N]",
		"Restarts a connector (its task configs are computed again), with --include-tasks its tasks\ntoo (--only-failed: the failed ones), or with --task one task. A restarted task runs at a new\ngeneration: its old instance can commit nothing more.")
	sf := addServerFlags(c)
	tasks := c.fs.Bool("include-tasks", false, "restart the tasks too")
	failed := c.fs.Bool("only-failed", false, "only what has failed")
	task := c.fs.Int("task", -1, "restart only task `N`")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		conn, err := oneConnector(c.name, args)
		if err != nil {
			return err
		}
		path := fmt.Sprintf("/connectors/%s/restart?includeTasks=%t&onlyFailed=%t", conn, *tasks, *failed)
		if *task >= 0 {
			path = fmt.Sprintf("/connectors/%s/tasks/%d/restart", conn, *task)
		}
		if err := connectCall(ctx, sf, c.name, "POST", path, nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "connector %s: restart requested\n", args[0])
		return nil
	}
}

func connectorsOffsetsCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("connectors offsets", "strata connectors offsets NAME [--reset | --set FILE]",
		"Prints a connector's offsets as Kafka Connect's {\"offsets\":[...]}. A STOPPED connector's can be\nset from such a file (--set; an offset of null resets its partition) or all reset (--reset).")
	sf := addServerFlags(c)
	reset := c.fs.Bool("reset", false, "reset every offset (the connector must be stopped)")
	set := c.fs.String("set", "", "`file` holding {\"offsets\":[{\"partition\":{...},\"offset\":{...}}]} to set (- for stdin)")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		conn, err := oneConnector(c.name, args)
		if err != nil {
			return err
		}
		var out any
		switch {
		case *reset && *set != "":
			return usagef(c.name, "--reset and --set: give one")
		case *reset:
			err = connectCall(ctx, sf, c.name, "DELETE", "/connectors/"+conn+"/offsets", nil, &out)
		case *set != "":
			var b []byte
			if *set == "-" {
				b, err = io.ReadAll(e.stdin)
			} else {
				b, err = os.ReadFile(*set)
			}
			if err != nil {
				return usagef(c.name, "--set: %v", err)
			}
			var body any
			if err := json.Unmarshal(b, &body); err != nil {
				return usagef(c.name, "--set %s: %v", *set, err)
			}
			err = connectCall(ctx, sf, c.name, "PATCH", "/connectors/"+conn+"/offsets", body, &out)
		default:
			err = connectCall(ctx, sf, c.name, "GET", "/connectors/"+conn+"/offsets", nil, &out)
		}
		if err != nil {
			return err
		}
		return json.NewEncoder(e.stdout).Encode(out)
	}
}

func connectorsPluginsCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("connectors plugins", "strata connectors plugins [--all]", "Lists the connector plugins the nodes run.")
	sf := addServerFlags(c)
	all := c.fs.Bool("all", false, "list transforms, predicates and converters too")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		var ps []struct{ Class, Type, Version string }
		if err := connectCall(ctx, sf, c.name, "GET", fmt.Sprintf("/connector-plugins?connectorsOnly=%t", !*all), nil, &ps); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLASS\tTYPE\tVERSION")
		for _, p := range ps {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Class, p.Type, p.Version)
		}
		return tw.Flush()
	}
}

func connectorsValidateCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("connectors validate", "strata connectors validate [--config KEY=VALUE ...] [--config-file FILE]",
		"Checks a connector config against its plugin's keys and prints each field's errors. Exit\ncode 1 when there are any.")
	sf := addServerFlags(c)
	cf := addConfigFlags(c)
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		cfg, err := cf.read(c.name, e.stdin)
		if err != nil {
			return err
		}
		class := cfg["connector.class"]
		if class == "" {
			return usagef(c.name, "the config names no connector.class")
		}
		var res struct {
			ErrorCount int `json:"error_count"`
			Configs    []struct {
				Value struct {
					Name   string   `json:"name"`
					Errors []string `json:"errors"`
				} `json:"value"`
			} `json:"configs"`
		}
		if err := connectCall(ctx, sf, c.name, "PUT", "/connector-plugins/"+url.PathEscape(class)+"/config/validate", cfg, &res); err != nil {
			return err
		}
		for _, cv := range res.Configs {
			for _, msg := range cv.Value.Errors {
				fmt.Fprintf(e.stdout, "%s: %s\n", cv.Value.Name, msg)
			}
		}
		if res.ErrorCount > 0 {
			return fmt.Errorf("%d error(s) in the config", res.ErrorCount)
		}
		fmt.Fprintln(e.stdout, "the config is valid")
		return nil
	}
}
