package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// Kafka's SCRAM credential administration (KIP-554): the core decides (cluster Alter
// or Describe, the credential rules); this maps its answers to Kafka's per-user codes.

func (s *Server) describeUserSCRAMCredentials(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	var users []string // nil: every user
	dup := map[string]bool{}
	if in.Users != nil {
		users = []string{}
		seen := map[string]bool{}
		for _, u := range in.Users {
			if seen[u.Name] {
				dup[u.Name] = true
				continue
			}
			seen[u.Name] = true
			if !dup[u.Name] {
				users = append(users, u.Name)
			}
		}
	}
	described, err := s.deps.Core.DescribeScramCredentials(ctx, r.who, users)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.kafkaError(err)
		return resp, nil
	}
	for _, u := range described {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u.User
		switch {
		case dup[u.User]:
			res.ErrorCode = kerr.DuplicateResource.Code
			msg := "cannot describe a user's credentials more than once in one request"
			res.ErrorMessage = &msg
		case len(u.Credentials) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			msg := "attempt to describe a user credential that does not exist"
			res.ErrorMessage = &msg
		}
		if res.ErrorCode == 0 {
			for _, c := range u.Credentials {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = int8(c.Mechanism), c.Iterations
				res.CredentialInfos = append(res.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func (s *Server) alterUserSCRAMCredentials(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	type change struct {
		deletions []catalog.ScramMechanism
		upserts   []broker.ScramUpsert
		dup       bool
	}
	var order []string
	byUser := map[string]*change{}
	seen := map[[2]any]bool{}
	get := func(user string, m int8) *change {
		c := byUser[user]
		if c == nil {
			c = &change{}
			byUser[user] = c
			order = append(order, user)
		}
		k := [2]any{user, m}
		if seen[k] {
			c.dup = true
		}
		seen[k] = true
		return c
	}
	for _, d := range in.Deletions {
		c := get(d.Name, d.Mechanism)
		c.deletions = append(c.deletions, catalog.ScramMechanism(d.Mechanism))
	}
	for _, u := range in.Upsertions {
		c := get(u.Name, u.Mechanism)
		c.upserts = append(c.upserts, broker.ScramUpsert{Mechanism: catalog.ScramMechanism(u.Mechanism), Iterations: u.Iterations,
			Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	for _, user := range order {
		c := byUser[user]
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		if c.dup {
			res.ErrorCode = kerr.DuplicateResource.Code
			msg := "a user credential cannot be altered twice in the same request"
			res.ErrorMessage = &msg
		} else if err := s.deps.Core.AlterScramCredentials(ctx, r.who, user, c.deletions, c.upserts); err != nil {
			res.ErrorCode, res.ErrorMessage = s.scramError(err)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// scramError is kafkaError with Kafka's SCRAM codes: a credential the rules refuse is
// UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM.
func (s *Server) scramError(err error) (int16, *string) {
	code, msg := s.kafkaError(err)
	var e *broker.Error
	if errors.As(err, &e) && e.Code == broker.CodeInvalidRequest {
		code = kerr.UnacceptableCredential.Code
		if e.Details["field"] == "mechanism" {
			code = kerr.UnsupportedSaslMechanism.Code
		}
	}
	return code, msg
}
