package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/check"
	"github.com/strata-io/strata/internal/testkit/faultproxy"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/objstore/s3"
)

// The fault classes a torture run knows. Each runs its own cluster, catalog and bucket.
const (
	ClassKill       = "kill"       // SIGKILL of node and compactor processes, restarted
	ClassPause      = "pause"      // SIGSTOP / SIGCONT of node and compactor processes
	ClassStore      = "store"      // the objstore/fault decorator, in-process nodes
	ClassS3Proxy    = "s3proxy"    // an HTTP proxy in front of MinIO
	ClassPGRestart  = "pg-restart" // Postgres crashed with -m immediate and restarted
	ClassPGCut      = "pg-cut"     // catalog connections cut right after COMMIT
	ClassCompaction = "compaction" // compaction and deletion racing reads, compactor killed
	ClassAll        = "all"        // every process fault together
)

// Classes lists every class, in the order a full run takes them.
var Classes = []string{ClassKill, ClassPause, ClassStore, ClassS3Proxy, ClassPGRestart, ClassPGCut, ClassCompaction, ClassAll}

// S3Config locates the S3-compatible store (MinIO) the runs use.
type S3Config struct {
	Endpoint, AccessKey, SecretKey, Region string
}

// Env is what a torture run needs from its surroundings. Tests fill it from
// internal/testsvc; the torture command from its flags.
type Env struct {
	// Binary is the strata binary the process classes run.
	Binary string
	// NewDatabase returns the DSN of a fresh, empty catalog database.
	NewDatabase func(ctx context.Context) (string, error)
	// NewPrivatePostgres returns a Postgres of the run's own, which it may crash.
	NewPrivatePostgres func(ctx context.Context) (*PrivatePostgres, error)
	S3                 S3Config
	// Dir receives process logs and histories.
	Dir string
	Log *slog.Logger
}

// RunConfig says how long a class runs and with what workload.
type RunConfig struct {
	Duration time.Duration
	// Quiet and Active are the schedule's windows (defaults 2s and 4s).
	Quiet, Active time.Duration
	Workload      WorkloadConfig
	// Kafka adds the Kafka-client workload (franz-go producers and group members,
	// kafka.go) to the process classes: the nodes serve the Kafka protocol.
	Kafka bool
}

// Result is one class's run.
type Result struct {
	Class    string
	Duration time.Duration
	Report   *Report
	History  *History
	// Faults counts fault windows started.
	Faults int
	// Notes says what the faults touched (proxy counts, ...).
	Notes []string
	// Check is what `strata check` found after the run: the catalog against the
	// bucket (strays are not counted: the sweep may not have run yet).
	Check *check.Report
	// Err is a failure of the harness itself (a service that did not come back).
	Err error
}

// OK reports whether the run found nothing wrong.
func (r *Result) OK() bool {
	return r.Err == nil && r.Report != nil && r.Report.Valid() && r.Check != nil && r.Check.OK()
}

// Run runs one fault class. A harness failure is returned in Result.Err, with
// whatever was checked.
func Run(ctx context.Context, env Env, class string, rc RunConfig) *Result {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	res := &Result{Class: class}
	dir, err := os.MkdirTemp(env.Dir, "torture-"+class+"-")
	if err != nil {
		res.Err = err
		return res
	}
	start := time.Now()
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()
	res.Err = run(ctx, env, class, rc, dir, res, func(f func()) { cleanups = append(cleanups, f) })
	res.Duration = time.Since(start)
	if res.History != nil {
		if f, err := os.Create(filepath.Join(dir, "history.json")); err == nil {
			_ = res.History.WriteJSON(f)
			f.Close()
		}
	}
	return res
}

func run(ctx context.Context, env Env, class string, rc RunConfig, dir string, res *Result, cleanup func(func())) error {
	su := &setup{env: env, log: env.Log.With("class", class), res: res, cleanup: cleanup}
	if err := su.parseClass(class); err != nil {
		return err
	}
	if err := su.database(ctx); err != nil {
		return err
	}
	if err := su.bucket(ctx); err != nil {
		return err
	}
	wcfg := rc.Workload
	var tg *target
	var err error
	if su.has(ClassStore) {
		tg, err = su.inProcess(ctx)
	} else {
		tg, err = su.cluster(ctx, dir, rc.Kafka, &wcfg)
	}
	if err != nil {
		return err
	}
	su.proxyNotes()
	return su.workload(ctx, rc, wcfg, tg)
}

// setup is what a class's run builds before its workload: the catalog database (behind
// a cutting proxy for pg-cut), the bucket (behind a faulting proxy for s3proxy), and the
// cleanups and notes of each.
type setup struct {
	env     Env
	log     *slog.Logger
	res     *Result
	cleanup func(func())
	parts   []string // the class's faults

	dsn  string
	pg   *PrivatePostgres     // pg-restart, pg-cut
	pgpx *faultproxy.Postgres // pg-cut

	name     string    // the bucket's
	direct   *s3.Store // the bucket, not through the proxy
	endpoint string    // what the nodes reach the store at
	s3px     *faultproxy.HTTP
}

// target is what a workload runs against: the nodes, how produces and fetches are
// routed on role-split clusters, the faults to inject and how to heal them all.
type target struct {
	nodes, writers, readers []string
	faults                  []Fault
	heal                    func(ctx context.Context) error
}

func (su *setup) has(name string) bool { return slices.Contains(su.parts, name) }

// parseClass reads a class: one name, or process faults joined with '+' to run together
// ("kill+pg-cut"); "all" is every process fault.
func (su *setup) parseClass(class string) error {
	su.parts = strings.Split(class, "+")
	if class == ClassAll {
		su.parts = []string{ClassKill, ClassPause, ClassS3Proxy, ClassPGRestart, ClassPGCut, ClassCompaction}
	}
	for _, p := range su.parts {
		if !slices.Contains(Classes, p) || p == ClassAll || (p == ClassStore && len(su.parts) > 1) {
			return fmt.Errorf("jepsen: unknown fault class %q (want one of %s, or process faults joined with '+')", class, strings.Join(Classes, ", "))
		}
	}
	return nil
}

// database makes the run's catalog database: a private Postgres for the classes that
// restart or cut it, else a database of the shared one.
func (su *setup) database(ctx context.Context) error {
	if !su.has(ClassPGRestart) && !su.has(ClassPGCut) {
		var err error
		su.dsn, err = su.env.NewDatabase(ctx)
		return err
	}
	if su.env.NewPrivatePostgres == nil {
		return errors.New("jepsen: this class needs a private Postgres")
	}
	pg, err := su.env.NewPrivatePostgres(ctx)
	if err != nil {
		return err
	}
	su.pg, su.dsn = pg, pg.DSN
	if su.has(ClassPGCut) {
		if su.pgpx, err = faultproxy.NewPostgres(fmt.Sprintf("127.0.0.1:%d", pg.Port)); err != nil {
			return err
		}
		su.cleanup(func() { _ = su.pgpx.Close() })
		u, _ := url.Parse(su.dsn)
		u.Host = su.pgpx.Addr()
		su.dsn = u.String()
	}
	return nil
}

// bucket makes the run's bucket, and the proxy in front of the store for s3proxy.
func (su *setup) bucket(ctx context.Context) error {
	su.name = fmt.Sprintf("strata-torture-%d", time.Now().UnixNano())
	s3c := su.env.S3
	direct, err := s3.New(ctx, s3.Config{Bucket: su.name, Prefix: "t", Endpoint: s3c.Endpoint, Region: s3c.Region,
		PathStyle: true, AccessKey: s3c.AccessKey, SecretKey: s3c.SecretKey}, su.log)
	if err != nil {
		return err
	}
	if err := direct.EnsureBucket(ctx); err != nil {
		return fmt.Errorf("jepsen: create bucket: %w", err)
	}
	su.direct, su.endpoint = direct, s3c.Endpoint
	if su.has(ClassS3Proxy) {
		if su.s3px, err = faultproxy.NewHTTP(s3c.Endpoint); err != nil {
			return err
		}
		su.cleanup(func() { _ = su.s3px.Close() })
		su.endpoint = su.s3px.URL()
	}
	return nil
}

// inProcess starts the store class's target: two in-process nodes over the fault
// decorator.
func (su *setup) inProcess(ctx context.Context) (*target, error) {
	cat, err := postgres.Open(ctx, su.dsn, catalog.Options{CommitTimeout: 3 * time.Second, Logger: su.log})
	if err != nil {
		return nil, err
	}
	su.cleanup(func() { _ = cat.Close() })
	fs := fault.New(su.direct)
	tg := &target{}
	for range 2 {
		n, err := StartNode(ctx, NodeConfig{Catalog: cat, Store: fs, CommitTimeout: 3 * time.Second, Log: su.log})
		if err != nil {
			return nil, err
		}
		su.cleanup(func() {
			if err := n.Close(); err != nil {
				su.res.Notes = append(su.res.Notes, "node: "+err.Error())
			}
		})
		tg.nodes = append(tg.nodes, n.URL)
	}
	tg.faults = []Fault{&StoreFault{Store: fs}}
	tg.heal = func(context.Context) error { fs.ClearAll(); return nil }
	su.cleanup(func() {
		var parts []string
		for _, op := range fault.Ops {
			parts = append(parts, fmt.Sprintf("%s %d/%d", op, fs.Injected(op), fs.Calls(op)))
		}
		su.res.Notes = append(su.res.Notes, "store calls faulted/total: "+strings.Join(parts, ", "))
	})
	return tg, nil
}

// cluster starts a process class's target: a cluster of strata processes (serving the
// Kafka protocol too with kafka, for the Kafka-client workload), with the
// class's faults on them (the compaction class also rereads more, in wcfg).
func (su *setup) cluster(ctx context.Context, dir string, kafka bool, wcfg *WorkloadConfig) (*target, error) {
	env := su.env
	if env.Binary == "" {
		return nil, errors.New("jepsen: no strata binary for the process classes")
	}
	q := url.Values{"endpoint": {su.endpoint}, "path_style": {"true"}}
	if env.S3.Region != "" {
		q.Set("region", env.S3.Region)
	}
	var penv []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") && !strings.HasPrefix(kv, "AWS_") {
			penv = append(penv, kv)
		}
	}
	penv = append(penv, "AWS_ACCESS_KEY_ID="+env.S3.AccessKey, "AWS_SECRET_ACCESS_KEY="+env.S3.SecretKey)
	cl, err := StartCluster(ctx, ClusterConfig{
		Binary: env.Binary, Compactor: true, Kafka: kafka,
		Catalog: su.dsn, Bucket: "s3://" + su.name + "/t?" + q.Encode(), Env: penv, Dir: dir,
	})
	if err != nil {
		return nil, err
	}
	wcfg.Kafka.Seeds = cl.KafkaAddrs()
	su.cleanup(cl.Close)
	tg := &target{nodes: cl.NodeURLs(), writers: cl.RoleURLs("writer"), readers: cl.RoleURLs("reader")}
	for _, p := range su.parts {
		switch p {
		case ClassKill:
			tg.faults = append(tg.faults, &KillFault{Procs: cl.Procs})
		case ClassPause:
			tg.faults = append(tg.faults, &PauseFault{Procs: cl.Procs})
		case ClassS3Proxy:
			tg.faults = append(tg.faults, &ProxyFault{Proxy: su.s3px})
		case ClassPGRestart:
			tg.faults = append(tg.faults, &PGRestartFault{PG: su.pg})
		case ClassPGCut:
			tg.faults = append(tg.faults, &PGCutFault{Proxy: su.pgpx})
		case ClassCompaction:
			tg.faults = append(tg.faults, &KillFault{Procs: cl.Procs[len(cl.Procs)-1:]})
			wcfg.Rereaders = max(wcfg.Rereaders, 2)
		}
	}
	tg.heal = func(ctx context.Context) error {
		// Every fault's Stop is safe to repeat: whatever the schedule left
		// behind (a Postgres still down, a proxy still cutting) is healed here.
		var errs []error
		for _, f := range HealOrder(tg.faults) {
			if err := f.Stop(ctx); err != nil {
				errs = append(errs, fmt.Errorf("heal %s: %w", f.Name(), err))
			}
		}
		return errors.Join(append(errs, cl.Heal(ctx))...)
	}
	compactorURL := cl.Procs[len(cl.Procs)-1].URL
	res := su.res
	su.cleanup(func() { res.Notes = append(res.Notes, compactorNote(compactorURL)) })
	su.cleanup(func() {
		if res.Err != nil || (res.Report != nil && !res.Report.Valid()) {
			res.Notes = append(res.Notes, "process logs:\n"+cl.Logs())
		}
	})
	return tg, nil
}

// proxyNotes notes, when the run ends, what the proxies faulted.
func (su *setup) proxyNotes() {
	if su.s3px != nil {
		su.cleanup(func() {
			n, inj := su.s3px.Counts()
			su.res.Notes = append(su.res.Notes, fmt.Sprintf("s3 proxy: %d of %d requests faulted", inj, n))
		})
	}
	if su.pgpx != nil {
		su.cleanup(func() {
			commits, cuts := su.pgpx.Counts()
			su.res.Notes = append(su.res.Notes, fmt.Sprintf("pg proxy: %d of %d writing transactions cut after COMMIT", cuts, commits))
		})
	}
}

// workload runs the workload against tg under the fault schedule for rc.Duration,
// heals, reads everything back and checks the history and the store.
func (su *setup) workload(ctx context.Context, rc RunConfig, wcfg WorkloadConfig, tg *target) error {
	res := su.res
	wcfg.Log = su.log
	bal := NewBalancer(tg.nodes)
	bal.SetRoles(tg.writers, tg.readers)
	wl := NewWorkload(bal, wcfg)
	res.History = wl.History()
	if err := wl.Setup(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithTimeout(ctx, rc.Duration)
	defer cancel()
	wl.Start(runCtx)
	sched := Schedule{Faults: tg.faults, Quiet: rc.Quiet, Active: rc.Active}
	schedErr := sched.Run(runCtx, wl.History())
	for _, e := range wl.History().Events {
		if strings.HasPrefix(e.What, "start:") {
			res.Faults++
		}
	}
	// Heal everything, let the workload finish, then read it all back.
	hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer hcancel()
	healErr := tg.heal(hctx)
	wl.Stop()
	if err := WaitReady(hctx, tg.nodes); err != nil {
		healErr = errors.Join(healErr, err)
	}
	wl.Final(ctx)
	res.Report = Check(wl.History())
	checkDSN := su.dsn
	if su.pg != nil {
		checkDSN = su.pg.DSN // not through the proxy
	}
	var err error
	if res.Check, err = checkStore(ctx, checkDSN, su.direct, su.log); err != nil {
		return errors.Join(schedErr, healErr, err)
	}
	if schedErr != nil || healErr != nil {
		return errors.Join(schedErr, healErr)
	}
	return nil
}

// WriteTable writes the summary table of a set of runs.
func WriteTable(w io.Writer, results []*Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tduration\twindows\tok\tfailed\tunknown\tpolls\tlost\tunseen\tinconsistent\tduplicates(idem)\tnonmonotonic\tskipping\trefused-visible\tphantom\tfinal-incomplete\tgroup\ttxns(c/a/u)\ttxn-anomalies\tshares(d/a/dlq)\tshare-anomalies\tcheck\tverdict\t")
	for _, r := range results {
		if r.Report == nil {
			fmt.Fprintf(tw, "%s\t%s\t%d\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tERROR\t\n", r.Class, r.Duration.Round(time.Second), r.Faults)
			continue
		}
		c := r.Report.Counts
		verdict := "PASS"
		if !r.OK() {
			verdict = "FAIL"
		}
		checked := "-"
		if r.Check != nil {
			checked = fmt.Sprint(len(r.Check.Problems))
		}
		txns := fmt.Sprintf("%d/%d/%d", r.Report.TxnCommitted, r.Report.TxnAborted, r.Report.TxnUnknown)
		shares := fmt.Sprintf("%d/%d/%d", r.Report.ShareDeliveries, r.Report.ShareAccepted, r.Report.ShareDeadLettered)
		shareAnomalies := c[ShareAcceptedTwice] + c[ShareRedelivered] + c[ShareHeldTwice] + c[ShareOverLimit] + c[ShareNotAccepted] + c[ShareNotDrained] + c[ShareDLQDuplicate] + c[ShareDLQMissing] + c[ShareDLQAccepted]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d(%d)\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%d\t%s\t%s\t\n",
			r.Class, r.Duration.Round(time.Second), r.Faults, r.Report.OK, r.Report.Failed, r.Report.Unknown, r.Report.Polls,
			c[Lost], c[Unseen], c[Inconsistent], c[Duplicate], r.Report.DuplicatesIdempotent, c[Nonmonotonic], c[Skipping],
			c[RefusedVisible], c[Phantom], c[FinalIncomplete], c[GroupRegressed]+c[GroupBeyondHWM]+c[GroupSkipped],
			txns, c[TxnAbortedRead]+c[TxnTorn]+c[TxnLost]+c[TxnDuplicate]+c[TxnOffsetsWithoutOutputs], shares, shareAnomalies, checked, verdict)
	}
	tw.Flush()
	for _, r := range results {
		if r.Err != nil {
			fmt.Fprintf(w, "%s: harness error: %v\n", r.Class, r.Err)
		}
		if r.Check != nil && !r.Check.OK() {
			fmt.Fprintf(w, "%s: strata check:\n", r.Class)
			r.Check.WriteText(w)
		}
		if r.Report != nil && !r.Report.Valid() {
			fmt.Fprintf(w, "%s anomalies:\n", r.Class)
			for _, a := range r.Report.Anomalies() {
				fmt.Fprintf(w, "  %s\n", a)
			}
		}
	}
}

// compactorNote scrapes the compactor process's counters (since its last start).
func compactorNote(base string) string {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return "compactor metrics: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, m := range []string{"merges_total", "objects_deleted_total", "orphans_swept_total", "swap_conflicts_total", "rows_dropped_total"} {
			if strings.HasPrefix(line, "strata_compactor_"+m+" ") {
				parts = append(parts, strings.TrimPrefix(line, "strata_compactor_"))
			}
		}
	}
	return "compactor since its last start: " + strings.Join(parts, ", ")
}

// checkStore runs `strata check` against the run's catalog and bucket, with every
// batch verified. Objects without a row are not reported (SweepAge an hour): a short
// run ends before the orphan sweep has had its chance.
func checkStore(ctx context.Context, dsn string, st *s3.Store, log *slog.Logger) (*check.Report, error) {
	cat, err := postgres.Open(ctx, dsn, catalog.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("jepsen: check: %w", err)
	}
	defer cat.Close()
	return check.Run(ctx, cat, st, check.Options{SweepAge: time.Hour, Verify: true, Log: log})
}
