// Package kafkatest is a bare Kafka connection for tests of what a client library
// hides: a SASL refusal followed by a close, a connection the server cuts while it is
// idle. Requests go out in non-flexible versions with a v1 header.
package kafkatest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Conn is one connection to a Kafka listener.
type Conn struct {
	t    testing.TB
	c    net.Conn
	corr int32
}

// Dial connects to addr; the connection is closed when the test ends.
func Dial(t testing.TB, addr string) *Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &Conn{t: t, c: c}
}

// RoundTrip sends req, whose version must not be flexible, and reads the answer into
// resp.
func (k *Conn) RoundTrip(req kmsg.Request, resp kmsg.Response) error {
	if req.IsFlexible() {
		return fmt.Errorf("kafkatest: %s v%d is flexible: use an older version", kmsg.NameForKey(req.Key()), req.GetVersion())
	}
	k.corr++
	buf := make([]byte, 4, 64)
	buf = kbin.AppendInt16(buf, req.Key())
	buf = kbin.AppendInt16(buf, req.GetVersion())
	buf = kbin.AppendInt32(buf, k.corr)
	buf = kbin.AppendNullableString(buf, nil)
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	_ = k.c.SetDeadline(time.Now().Add(5 * time.Second))
	defer k.c.SetDeadline(time.Time{})
	if _, err := k.c.Write(buf); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(k.c, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(k.c, body); err != nil {
		return err
	}
	if len(body) < 4 {
		return errors.New("kafkatest: a response without a correlation id")
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body[4:])
}

// Authenticate runs SaslHandshake and SaslAuthenticate (v1) with PLAIN credentials and
// answers SaslAuthenticate's error code.
func (k *Conn) Authenticate(user, pass string) int16 {
	k.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	hsr := kmsg.NewPtrSASLHandshakeResponse()
	if err := k.RoundTrip(hs, hsr); err != nil || hsr.ErrorCode != 0 {
		k.t.Fatalf("SaslHandshake: %v, code %d", err, hsr.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00"+user+"\x00"+pass)
	aur := kmsg.NewPtrSASLAuthenticateResponse()
	if err := k.RoundTrip(au, aur); err != nil {
		k.t.Fatalf("SaslAuthenticate: %v", err)
	}
	return aur.ErrorCode
}

// Metadata asks for one topic (v1).
func (k *Conn) Metadata(topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &topic
	req.Topics = append(req.Topics, mt)
	resp := kmsg.NewPtrMetadataResponse()
	return resp, k.RoundTrip(req, resp)
}

// ClosedWithin waits up to d for the server to close the connection: a read that ends
// in EOF or a reset, not at the deadline.
func (k *Conn) ClosedWithin(d time.Duration) error {
	_ = k.c.SetReadDeadline(time.Now().Add(d))
	_, err := k.c.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("still open after %v", d)
	case err == nil:
		return errors.New("the server sent more")
	}
	return nil
}
