package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/acl"
)

// The ACL requests (KIP-140): DescribeAcls, CreateAcls and DeleteAcls, over the core's
// ACL calls, which keep the bindings in the catalog for every node and both front ends.
// Package acl uses Kafka's codes for operations, resource, pattern and permission
// types, so the fields convert one to one; the core validates them. Strata's own
// resource types (connector) are not Kafka's: a Kafka client can neither name nor show
// them, so its filters select Kafka's types only (acl.Filter.KafkaOnly: DescribeAcls
// leaves connector bindings out and DeleteAcls leaves them alone), and CreateAcls
// refuses them.

// filterOf converts a request's filter fields.
func filterOf(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Filter {
	return acl.Filter{Resource: acl.ResourceType(rt), Name: name, Pattern: acl.PatternType(pt), Principal: principal,
		Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm), KafkaOnly: true}
}

func (s *Server) describeACLs(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := filterOf(in.ResourceType, in.ResourceName, in.ResourcePatternType, in.Principal, in.Host, in.Operation, in.PermissionType)
	bs, err := s.deps.Core.DescribeACLs(ctx, r.who, f)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.kafkaError(err)
		return resp, nil
	}
	// One resource entry per (type, name, pattern), its entries under it.
	index := map[[3]string]int{}
	for _, b := range bs {
		k := [3]string{b.Resource.String(), b.Name, b.Pattern.String()}
		i, ok := index[k]
		if !ok {
			rr := kmsg.NewDescribeACLsResponseResource()
			rr.ResourceType, rr.ResourceName = kmsg.ACLResourceType(b.Resource), b.Name
			rr.ResourcePatternType = kmsg.ACLResourcePatternType(b.Pattern)
			resp.Resources = append(resp.Resources, rr)
			i = len(resp.Resources) - 1
			index[k] = i
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = b.Principal, b.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, e)
	}
	return resp, nil
}

func (s *Server) createACLs(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for _, c := range in.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		b := acl.Binding{Principal: c.Principal, Host: c.Host, Resource: acl.ResourceType(c.ResourceType), Name: c.ResourceName,
			Pattern: acl.PatternType(c.ResourcePatternType), Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)}
		if b.Resource >= acl.FirstStrataType {
			msg := fmt.Sprintf("resource type %d is not one of Kafka's (topic, group, cluster, transactional-id): manage Strata's own types' ACLs (connector, subject) over the HTTP API (strata acls)", c.ResourceType)
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, &msg
		} else if err := s.deps.Core.CreateACL(ctx, r.who, b); err != nil {
			res.ErrorCode, res.ErrorMessage = s.kafkaError(err)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func (s *Server) deleteACLs(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for _, f := range in.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		bs, err := s.deps.Core.DeleteACLs(ctx, r.who, filterOf(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType))
		if err != nil {
			res.ErrorCode, res.ErrorMessage = s.kafkaError(err)
		}
		for _, b := range bs {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.Resource), b.Name
			m.ResourcePatternType = kmsg.ACLResourcePatternType(b.Pattern)
			m.Principal, m.Host = b.Principal, b.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
