package broker

import (
	"context"
	"testing"

	"github.com/strata-io/strata/acl"
)

// TestAuthorizeCoordinator: finding a group's coordinator needs describe on the group,
// a transaction's describe on its transactional id (not the other way about), and an
// unknown kind is an invalid request, asked before any authorization.
func TestAuthorizeCoordinator(t *testing.T) {
	e := newEnv(t)
	auth := &countingAuthorizer{refused: map[acl.Resource]bool{acl.Group("g"): true, acl.TransactionalID("x"): true}, asked: map[acl.Resource]int{}}
	e.b.d.Authorizer = auth
	ctx, who := context.Background(), Principal{Name: "User:p"}
	for _, tc := range []struct {
		kind CoordinatorKind
		key  string
		code Code
		res  acl.Resource
	}{
		{CoordinatorGroup, "g", CodeForbidden, acl.Group("g")},
		{CoordinatorGroup, "x", "", acl.Group("x")},
		{CoordinatorTransaction, "x", CodeForbidden, acl.TransactionalID("x")},
		{CoordinatorTransaction, "g", "", acl.TransactionalID("g")},
	} {
		err := e.b.AuthorizeCoordinator(ctx, who, tc.kind, tc.key)
		if tc.code == "" {
			if err != nil {
				t.Errorf("kind %d key %s: %v", tc.kind, tc.key, err)
			}
		} else {
			er := wantCode(t, err, tc.code)
			if er.Details["operation"] != "describe" || er.Details["resource"] != tc.key || er.Details["resource_type"] != tc.res.Type.String() {
				t.Errorf("kind %d key %s: details %v", tc.kind, tc.key, er.Details)
			}
		}
		if auth.asked[tc.res] == 0 {
			t.Errorf("kind %d key %s: %s not asked about", tc.kind, tc.key, tc.res)
		}
	}
	n := len(auth.asked)
	wantCode(t, e.b.AuthorizeCoordinator(ctx, who, 7, "g"), CodeInvalidRequest)
	if len(auth.asked) != n || auth.asked[acl.Group("g")] != 1 {
		t.Errorf("an unknown kind was authorized: %v", auth.asked)
	}
}

// TestDescribeNodeConfigs: a node's configs are asked for with describe-configs on the
// cluster, and none are listed.
func TestDescribeNodeConfigs(t *testing.T) {
	e := newEnv(t)
	ctx, who := context.Background(), Principal{Name: "User:p"}
	if cs, err := e.b.DescribeNodeConfigs(ctx, who); err != nil || cs == nil || len(cs) != 0 {
		t.Fatalf("without authorization: %v, %v", cs, err)
	}
	e.b.d.Authorizer = &countingAuthorizer{refused: map[acl.Resource]bool{acl.Cluster(): true}, asked: map[acl.Resource]int{}}
	er := wantCode(t, second(e.b.DescribeNodeConfigs(ctx, who)), CodeForbidden)
	if er.Details["operation"] != acl.OpDescribeConfigs.String() || er.Details["resource_type"] != acl.Cluster().Type.String() {
		t.Errorf("details %v", er.Details)
	}
}
