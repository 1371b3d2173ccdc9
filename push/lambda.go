package push

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// LambdaInvoker invokes Lambda targets through aws-sdk-go-v2's Lambda client, with
// the node's credentials. Its answers map onto a webhook's, so they are acknowledged
// the same way: an invocation that ran answers 200 and the function's payload (which
// may reject records one by one); a function error (the function ran and failed) is a
// failed call, released without using up a delivery; AWS's refusals answer their
// HTTP status — an unknown function (404) or one the node may not invoke (403) pause
// the subscription with AWS's error, throttling (429) waits.
type LambdaInvoker struct {
	Client *lambda.Client
}

// NewLambdaInvoker makes an invoker over cfg (aws-sdk-go-v2's config); the SDK's own
// retries are off, as the role retries by its policy.
func NewLambdaInvoker(cfg aws.Config, optFns ...func(*lambda.Options)) LambdaInvoker {
	return LambdaInvoker{Client: lambda.NewFromConfig(cfg, append([]func(*lambda.Options){func(o *lambda.Options) {
		o.RetryMaxAttempts = 1
	}}, optFns...)...)}
}

// Invoke implements Invoker.
func (l LambdaInvoker) Invoke(ctx context.Context, arn string, payload []byte) (int, []byte, string, error) {
	out, err := l.Client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(arn), Payload: payload,
		InvocationType: types.InvocationTypeRequestResponse})
	if err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() > 0 {
			return re.HTTPStatusCode(), []byte(err.Error()), "", nil
		}
		return 0, nil, "", fmt.Errorf("invoke %s: %w", arn, err)
	}
	if out.FunctionError != nil {
		return int(out.StatusCode), out.Payload, aws.ToString(out.FunctionError), nil
	}
	return int(out.StatusCode), out.Payload, "", nil
}

// DefaultLambda is a LambdaInvoker over the node's default AWS configuration
// (environment, shared files, the instance's role), loaded at the first invocation so
// that a node without Lambda targets never needs one; until it loads, invocations fail
// (released, retried) with the reason.
type DefaultLambda struct {
	mu  sync.Mutex
	inv *LambdaInvoker
}

// Invoke implements Invoker.
func (d *DefaultLambda) Invoke(ctx context.Context, arn string, payload []byte) (int, []byte, string, error) {
	d.mu.Lock()
	if d.inv == nil {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			d.mu.Unlock()
			return 0, nil, "", fmt.Errorf("load the AWS configuration for Lambda: %w", err)
		}
		inv := NewLambdaInvoker(cfg)
		d.inv = &inv
	}
	inv := d.inv
	d.mu.Unlock()
	return inv.Invoke(ctx, arn, payload)
}
