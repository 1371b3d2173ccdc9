package kafka

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/security"
)

// fuzzServers are one listener without keys and one with, shared by every input.
var fuzzServers = func() [2]*Server {
	var out [2]*Server
	for i, auth := range []Authenticator{nil, staticKeys([]string{keyA})} {
		fc := newFakeCluster(catalog.Node{ID: 0, Addr: "127.0.0.1:9092"})
		fc.add("orders", 3)
		s, err := New(Config{Auth: auth, AutoCreateTopics: true, IdleTimeout: time.Minute}, Deps{Core: fc.core(), Membership: fc, Self: fixedSelf(fc.nodes[0])}, nil, nil)
		if err != nil {
			panic(err)
		}
		out[i] = s
	}
	return out
}()

func seedFrames(f *testing.F) {
	add := func(reqs ...func() ([]byte, error)) {
		var all []byte
		for _, r := range reqs {
			b, _ := r()
			all = append(all, b...)
		}
		f.Add(all)
	}
	frame := func(req kmsg.Request, v int16) func() ([]byte, error) {
		return func() ([]byte, error) {
			req.SetVersion(v)
			return kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz")).AppendRequest(nil, req, 1), nil
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	name := "orders"
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &name
	md.Topics = []kmsg.MetadataRequestTopic{rt}
	fcReq := kmsg.NewPtrFindCoordinatorRequest()
	fcReq.CoordinatorKeys = []string{"g"}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = plain(security.StaticKeyID(keyA), keyA)
	for v := int16(0); v <= 3; v++ {
		add(frame(kmsg.NewPtrApiVersionsRequest(), v))
	}
	for _, v := range []int16{0, 1, 4, 7, 9, 10, 12} {
		add(frame(md, v))
	}
	add(frame(fcReq, 4), frame(kmsg.NewPtrDescribeClusterRequest(), 1))
	add(frame(hs, 1), frame(auth, 2), frame(md, 12))
	raw := binary.BigEndian.AppendUint32(nil, uint32(len(auth.SASLAuthBytes)))
	add(frame(hs, 0), func() ([]byte, error) { return append(raw, auth.SASLAuthBytes...), nil }, frame(md, 1))
	// The record APIs (the fuzz servers' core has no roles: they are refused after
	// decoding, which is what is fuzzed here; segment fuzzes the batches).
	prod := kmsg.NewPtrProduceRequest()
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49, 0, 0, 0, 0, 2}
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	fetch := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "orders"
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	fetch.Topics = append(fetch.Topics, ft)
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "orders"
	lt.Partitions = append(lt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
	lo.Topics = append(lo.Topics, lt)
	add(frame(prod, 3), frame(prod, 9), frame(fetch, 4), frame(fetch, 12), frame(lo, 7), frame(kmsg.NewPtrInitProducerIDRequest(), 4))
	add(frame(kmsg.NewPtrCreateTopicsRequest(), 7), frame(kmsg.NewPtrDescribeConfigsRequest(), 4), frame(kmsg.NewPtrOffsetFetchRequest(), 8))
	// The transaction APIs, as a transactional producer sends them in order.
	tid := "tx"
	initTxn := kmsg.NewPtrInitProducerIDRequest()
	initTxn.TransactionalID, initTxn.TransactionTimeoutMillis = &tid, 60_000
	fcTxn := kmsg.NewPtrFindCoordinatorRequest()
	fcTxn.CoordinatorType, fcTxn.CoordinatorKeys = 1, []string{tid}
	addParts := kmsg.NewPtrAddPartitionsToTxnRequest()
	addParts.TransactionalID, addParts.ProducerID = tid, 1
	apt := kmsg.NewAddPartitionsToTxnRequestTopic()
	apt.Topic, apt.Partitions = "orders", []int32{0, 1}
	addParts.Topics = append(addParts.Topics, apt)
	batched := kmsg.NewPtrAddPartitionsToTxnRequest()
	bt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	bt.TransactionalID, bt.ProducerID, bt.VerifyOnly = tid, 1, true
	btt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	btt.Topic, btt.Partitions = "orders", []int32{2}
	bt.Topics = append(bt.Topics, btt)
	batched.Transactions = append(batched.Transactions, bt)
	addOffsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	addOffsets.TransactionalID, addOffsets.ProducerID, addOffsets.Group = tid, 1, "g"
	txnCommit := kmsg.NewPtrTxnOffsetCommitRequest()
	txnCommit.TransactionalID, txnCommit.Group, txnCommit.ProducerID, txnCommit.Generation = tid, "g", 1, -1
	tct := kmsg.NewTxnOffsetCommitRequestTopic()
	tct.Topic = "orders"
	tct.Partitions = append(tct.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
	txnCommit.Topics = append(txnCommit.Topics, tct)
	endTxn := kmsg.NewPtrEndTxnRequest()
	endTxn.TransactionalID, endTxn.ProducerID, endTxn.Commit = tid, 1, true
	describeTxns := kmsg.NewPtrDescribeTransactionsRequest()
	describeTxns.TransactionalIDs = []string{tid, ""}
	listTxns := kmsg.NewPtrListTransactionsRequest()
	listTxns.StateFilters, listTxns.DurationFilterMillis = []string{"Ongoing"}, 10
	txnProd := kmsg.NewPtrProduceRequest()
	*txnProd = *prod
	txnProd.TransactionID = &tid
	add(frame(fcTxn, 4), frame(initTxn, 4), frame(addParts, 3), frame(txnProd, 12), frame(addOffsets, 4), frame(txnCommit, 4), frame(endTxn, 5))
	add(frame(initTxn, 0), frame(addParts, 0), frame(txnProd, 3), frame(addOffsets, 0), frame(txnCommit, 0), frame(endTxn, 0))
	add(frame(batched, 4), frame(describeTxns, 0), frame(listTxns, 1))
	fetchRC := kmsg.NewPtrFetchRequest()
	*fetchRC = *fetch
	fetchRC.IsolationLevel = 1
	loRC := kmsg.NewPtrListOffsetsRequest()
	*loRC = *lo
	loRC.IsolationLevel = 1
	add(frame(fetchRC, 4), frame(fetchRC, 11), frame(loRC, 2))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 10, 0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
}

// FuzzConn feeds arbitrary bytes to a connection, with and without keys: whatever
// arrives, the connection answers or closes, never panics, and its goroutines end.
func FuzzConn(f *testing.F) {
	seedFrames(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, s := range fuzzServers {
			serverSide, clientSide := net.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			c := newConn(ctx, s, serverSide)
			served := make(chan struct{})
			go func() { c.serve(); close(served) }()
			go func() { _, _ = io.Copy(io.Discard, clientSide) }()
			_, _ = clientSide.Write(data)
			clientSide.Close()
			select {
			case <-served:
			case <-time.After(10 * time.Second):
				t.Fatalf("connection still serving 10s after the client left")
			}
			cancel()
		}
	})
}

// FuzzRequestDecode decodes arbitrary bodies as every version of every API served:
// kmsg must refuse or accept, never panic, and what it accepts re-encodes.
func FuzzRequestDecode(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 1, 'x'})
	f.Add([]byte{0, 0, 0, 1, 0, 6, 'o', 'r', 'd', 'e', 'r', 's', 1})
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, a := range fuzzServers[1].apis {
			for v := a.min; v <= a.max; v++ {
				req := kmsg.RequestForKey(a.key)
				req.SetVersion(v)
				if req.ReadFrom(body) == nil {
					_ = req.AppendTo(nil)
				}
			}
		}
	})
}
