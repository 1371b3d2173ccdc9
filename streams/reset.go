package streams

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/strata-io/strata/client"
)

// ResetOptions says how Reset rewinds an application.
type ResetOptions struct {
	// Application is the application id: its group and the prefix of its topics.
	Application string
	// InputTopics are the inputs to rewind. Default: every topic the group has
	// committed offsets of that is not one of the application's internal topics.
	InputTopics []string
	// ToTime, when set, rewinds the inputs to the first record at or after it;
	// default: to each partition's log start.
	ToTime time.Time
	// StateDir, when set, is the application's Config.StateDir on this machine: its
	// local state (<StateDir>/<app>) is wiped. Each machine that ran an instance with
	// a state directory needs this once (or the directory removed), though a stale
	// directory is harmless: its checkpoints lie outside the recreated changelogs,
	// which makes the runtime rebuild the stores from them.
	StateDir string
	// DryRun reports what would be done without doing it.
	DryRun bool
}

// ResetReport is what Reset did (or would do).
type ResetReport struct {
	Inputs         []client.GroupOffset // where the inputs now start (empty: at the log start)
	InputTopics    []string
	DeletedTopics  []string // internal topics
	WipedStateDir  string
	GroupDeleted   bool
	ReprocessFrom  string // "earliest" or the time
	LiveMembersNow int
}

// ErrAppRunning refuses a reset while an instance of the application is alive.
var ErrAppRunning = errors.New("streams: the application is running")

// internalSuffixes end the names of the topics an application makes for itself
// (<app>-<name>-…): changelogs, repartition topics, a foreign-key join's
// subscriptions and responses, and the interactive queries' instances topic.
var internalSuffixes = []string{"-changelog", "-repartition", "-subscription", "-response"}

// isInternal says topic is one of app's internal topics: <app>-<name><suffix>, or
// <app>-instances; not when a longer application id (a group named <app>-x) owns it.
func isInternal(app, topic string, groups []string) bool {
	rest, ok := strings.CutPrefix(topic, app+"-")
	if !ok {
		return false
	}
	for _, g := range groups {
		if len(g) > len(app) && strings.HasPrefix(g, app+"-") && strings.HasPrefix(topic, g+"-") {
			return false // another application's
		}
	}
	if rest == "instances" {
		return true
	}
	for _, s := range internalSuffixes {
		if strings.HasSuffix(rest, s) && len(rest) > len(s) {
			return true
		}
	}
	return false
}

// Reset rewinds an application so that its next run reprocesses its inputs from the
// start (or from a time) as if for the first time — Kafka Streams' reset tool: the
// group and its offsets (with the stream times saved in them) are deleted, so no
// instance may be alive; the internal topics (changelogs, repartition topics) are
// deleted, to be recreated empty by the next run; the inputs are positioned at the
// time asked (at their log start by default); and the local state directory given is
// wiped. The server refuses to delete a group with live members, so a reset racing
// with a starting instance fails rather than rewinding under it. Output topics are
// not touched: reprocessing appends to them.
func Reset(ctx context.Context, c *client.Client, o ResetOptions) (ResetReport, error) {
	rep := ResetReport{ReprocessFrom: "earliest"}
	if !validName.MatchString(o.Application) {
		return rep, fmt.Errorf("streams: reset: application id %q: use 1 to 100 letters, digits, '.', '_' or '-'", o.Application)
	}
	app := o.Application
	g, err := c.DescribeGroup(ctx, app)
	exists := err == nil
	if err != nil && !client.HasCode(err, client.CodeGroupNotFound) {
		return rep, fmt.Errorf("streams: reset %s: describe its group: %w", app, err)
	}
	if exists && len(g.Members) > 0 {
		rep.LiveMembersNow = len(g.Members)
		return rep, fmt.Errorf("%w: group %s has %d live members (%s): stop every instance, wait for their sessions to end, and reset again",
			ErrAppRunning, app, len(g.Members), memberIDs(g))
	}
	groups, err := c.ListGroups(ctx)
	if err != nil {
		return rep, fmt.Errorf("streams: reset %s: list groups: %w", app, err)
	}
	var gnames []string
	for _, gs := range groups {
		gnames = append(gnames, gs.Name)
	}
	topics, err := c.ListTopics(ctx)
	if err != nil {
		return rep, fmt.Errorf("streams: reset %s: list topics: %w", app, err)
	}
	for _, t := range topics {
		if isInternal(app, t.Name, gnames) {
			rep.DeletedTopics = append(rep.DeletedTopics, t.Name)
		}
	}
	inputs := slices.Clone(o.InputTopics)
	if len(inputs) == 0 && exists {
		offs, err := c.GroupOffsets(ctx, app)
		if err != nil && !client.HasCode(err, client.CodeGroupNotFound) {
			return rep, fmt.Errorf("streams: reset %s: read its offsets: %w", app, err)
		}
		for _, off := range offs {
			if !isInternal(app, off.Topic, gnames) && !slices.Contains(inputs, off.Topic) {
				inputs = append(inputs, off.Topic)
			}
		}
	}
	slices.Sort(inputs)
	rep.InputTopics = inputs
	if !o.ToTime.IsZero() {
		rep.ReprocessFrom = o.ToTime.UTC().Format(time.RFC3339Nano)
	}
	if o.StateDir != "" {
		rep.WipedStateDir = filepath.Join(o.StateDir, app)
	}
	if o.DryRun {
		rep.GroupDeleted = exists
		return rep, nil
	}
	// The group goes first: the server refuses while a member is alive, which
	// settles a race with an instance starting since the check above.
	if exists {
		if err := c.DeleteGroup(ctx, app); err != nil {
			if client.HasCode(err, "group_not_empty") {
				return rep, fmt.Errorf("%w: %v", ErrAppRunning, err)
			}
			if !client.HasCode(err, client.CodeGroupNotFound) {
				return rep, fmt.Errorf("streams: reset %s: delete its group: %w", app, err)
			}
		}
		rep.GroupDeleted = true
	}
	for _, t := range rep.DeletedTopics {
		if err := c.DeleteTopic(ctx, t); err != nil && !client.HasCode(err, "topic_not_found") {
			return rep, fmt.Errorf("streams: reset %s: delete internal topic %s: %w", app, t, err)
		}
	}
	if !o.ToTime.IsZero() {
		// Without offsets the application starts at the log start; a time needs them.
		for _, t := range inputs {
			offs, err := c.ResetOffsets(ctx, app, client.OffsetReset{Topic: t, To: "timestamp", Timestamp: o.ToTime, Create: true})
			if err != nil {
				return rep, fmt.Errorf("streams: reset %s: position input %s at %s: %w", app, t, rep.ReprocessFrom, err)
			}
			rep.Inputs = append(rep.Inputs, offs...)
		}
	}
	if rep.WipedStateDir != "" {
		if err := os.RemoveAll(rep.WipedStateDir); err != nil {
			return rep, fmt.Errorf("streams: reset %s: wipe the local state: %w", app, err)
		}
	}
	return rep, nil
}

func memberIDs(g client.Group) string {
	ids := make([]string, len(g.Members))
	for i, m := range g.Members {
		ids[i] = m.MemberID
	}
	return strings.Join(ids, ", ")
}
