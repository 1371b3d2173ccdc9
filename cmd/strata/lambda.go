package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/strata-io/strata/lambda"
)

// Lambda limits (lambda/lambda.go explains them).
const (
	// lambdaMaxWait keeps long-polls under API Gateway's 30 s integration timeout.
	lambdaMaxWait = 20 * time.Second
	// lambdaLinger: one invocation serves one request, so batching is the client's
	// linger; the writer cuts the flush at once and the invocation flushes it.
	lambdaLinger = time.Millisecond
	// lambdaPoolConns: one invocation at a time per sandbox needs few connections, and
	// RDS Proxy multiplexes them.
	lambdaPoolConns = "2"
)

func lambdaCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c, sf, streaming := lambdaFlags()
	// Before the flags: the secrets are some of their environment.
	c.beforeEnv = withLambdaSecrets
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q (flags start with --)", args[0])
		}
		if e.getenv("AWS_LAMBDA_RUNTIME_API") == "" {
			return usagef(c.name, "AWS_LAMBDA_RUNTIME_API is not set: strata lambda runs inside AWS Lambda (or the Lambda runtime interface emulator); to run a node elsewhere use strata serve")
		}
		h, n, err := startLambda(ctx, e, c, sf, *streaming)
		if err != nil {
			return err
		}
		go awslambda.StartWithOptions(h.Handle, awslambda.WithContext(ctx))
		// Lambda sends SIGTERM before it reclaims a sandbox (when an extension is
		// registered); each invocation has flushed already, so stopping is quick.
		<-ctx.Done()
		return stopLambda(n, sf.nf.shutdownTimeout)
	}
}

// lambdaFlags are serve's flags, with Lambda's linger, plus --streaming.
func lambdaFlags() (*command, *serveFlags, *bool) {
	c := newCommand("lambda", "strata lambda   (inside AWS Lambda: configured by STRATA_* environment variables)",
		`Answers AWS Lambda invocations: API Gateway HTTP API (payload 2.0) and Function URL
requests with the HTTP API, flushing the writer per invocation; scheduled (EventBridge)
events with one compaction pass. Lambda runs the binary, named bootstrap, without
arguments: it then runs this command. A Postgres catalog URL gets
default_query_exec_mode=exec and pool_max_conns=2 unless it sets them (RDS Proxy).
--listen and the --tls-* flags are not used: API Gateway and Function URLs terminate TLS.

STRATA_SECRETS="PGPASSWORD=SECRET_ARN#password,STRATA_API_KEYS=SECRET_ARN" reads those
variables from Secrets Manager at start-up (#KEY takes one key of a JSON secret), so that no
password or key sits in the function's plain environment.`)
	sf := addServeFlags(c, "127.0.0.1:0")
	sf.catalogParams = lambdaCatalogParams
	// A flush per request: the client's linger does the batching.
	sf.nf.linger = lambdaLinger
	c.fs.Lookup("linger").DefValue = lambdaLinger.String()
	streaming := c.fs.Bool("streaming", false, "the Function URL's invoke mode is RESPONSE_STREAM: Server-Sent Events tails stream through it (API Gateway answers them 406 streaming_unsupported)")
	c.shareEnv("streaming") // STRATA_STREAMING in the function's configuration
	return c, sf, streaming
}

// startLambda validates the flags, starts a node for Lambda and returns its invocation
// handler.
func startLambda(ctx context.Context, e *env, c *command, sf *serveFlags, streaming bool) (*lambda.Handler, *started, error) {
	spec, bad := sf.spec()
	if len(bad) > 0 {
		return nil, nil, badFlags(c.name, bad)
	}
	// The compactor runs only when a scheduled event asks (below), never as a loop: the
	// sandbox is frozen between invocations.
	spec.lambda = true
	spec.maxWait = lambdaMaxWait
	spec.api.NoStreaming = true
	n, err := startNode(ctx, e, spec)
	if err != nil {
		return nil, nil, err
	}
	cfg := lambda.Config{}
	if streaming {
		streamCfg := n.API.Config()
		streamCfg.NoStreaming = false
		cfg.Stream = n.NewAPI(streamCfg).Handler()
	}
	var fl lambda.Flusher
	if n.Writer != nil {
		fl = n.Writer
	}
	// Without the compactor role, scheduled events fail with lambda.ErrNoCompactor
	// rather than pretend a pass ran.
	var comp lambda.Compactor
	if n.Compactor != nil {
		comp = n.Compactor
	}
	return lambda.New(n.API.Handler(), fl, comp, cfg, n.log), n, nil
}

// stopLambda stops the roles, waits for them within timeout and closes the catalog.
func stopLambda(n *started, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	if n.Stop(ctx) != nil {
		err = errors.New("roles did not stop within --shutdown-timeout")
	}
	n.closeCatalog()
	return err
}

// lambdaCatalogParams are added to a Postgres --catalog that does not set them:
// default_query_exec_mode=exec (no prepared statements cached per connection, which RDS
// Proxy would pin or which would break when the proxy hands the client another server
// connection) and a small pool.
var lambdaCatalogParams = map[string]string{
	"default_query_exec_mode": "exec",
	"pool_max_conns":          lambdaPoolConns,
}

// withLambdaSecrets reads the secrets STRATA_SECRETS names from Secrets Manager, before
// the flags are parsed: STRATA_* values become flags' environment (over the plain
// environment), others (PGPASSWORD) are set in the process environment, where pgx
// reads them. Without STRATA_SECRETS, e comes back as it is.
func withLambdaSecrets(ctx context.Context, e *env) (*env, error) {
	spec := e.getenv(lambda.SecretsEnv)
	if spec == "" {
		return e, nil
	}
	refs, err := lambda.ParseSecretRefs(spec)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("lambda: AWS configuration for Secrets Manager: %w", err)
	}
	vals, err := lambda.LoadSecrets(ctx, secretsmanager.NewFromConfig(cfg), refs)
	if err != nil {
		return nil, err
	}
	overlay := map[string]string{}
	for k, v := range vals {
		if strings.HasPrefix(k, "STRATA_") {
			overlay[k] = v
		} else if err := os.Setenv(k, v); err != nil {
			return nil, fmt.Errorf("lambda: set %s from its secret: %w", k, err)
		}
	}
	out := *e
	out.getenv = func(k string) string {
		if v, ok := overlay[k]; ok {
			return v
		}
		return e.getenv(k)
	}
	return &out, nil
}
