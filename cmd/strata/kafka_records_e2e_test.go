package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testsvc"
)

// Records through kcat (librdkafka 2.0.2), the built binary serving them: produced with
// keys under each codec and with idempotence, read back byte for byte, and offsets
// found by time.

// kcatCodecs are the codecs kcat -z takes.
var kcatCodecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testsvc.Kcat(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kcat %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// kcatLines are n keyed "key:value" lines (the value has spaces, tabs, UTF-8 and the
// key delimiter in it), in the order produced.
func kcatLines(tag string, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("key-%d:%s %05d\tvalue ✓ a:b %s", i%13, tag, i, strings.Repeat("x", i%40))
	}
	return lines
}

// kcatRoundTrip produces lines to topic with kcat (-K: keys, -z codec, idempotent), then
// reads every partition from the beginning to its end (-C -p N -o beginning -e) and
// checks that each line came back byte for byte, once, each partition in the order
// produced.
func kcatRoundTrip(t *testing.T, bootstrap, topic string, partitions int, codec string) {
	t.Helper()
	lines := kcatLines(codec, 300)
	kcat(t, strings.Join(lines, "\n")+"\n", "-b", bootstrap, "-P", "-t", topic, "-K", ":", "-z", codec,
		"-X", "enable.idempotence=true", "-X", "linger.ms=5")
	index := map[string]int{}
	for i, l := range lines {
		index[l] = i
	}
	seen := 0
	for p := range partitions {
		out := kcat(t, "", "-b", bootstrap, "-C", "-t", topic, "-p", strconv.Itoa(p), "-o", "beginning", "-e", "-q",
			"-f", "%o|%k:%s\n")
		last, wantOffset := -1, int64(0)
		for _, row := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if row == "" {
				continue
			}
			off, line, _ := strings.Cut(row, "|")
			i, ok := index[line]
			if !ok {
				t.Fatalf("%s partition %d: %q was never produced", codec, p, row)
			}
			if i <= last {
				t.Fatalf("%s partition %d: line %d after line %d", codec, p, i, last)
			}
			if o, _ := strconv.ParseInt(off, 10, 64); o != wantOffset {
				t.Fatalf("%s partition %d: offset %s, want %d (dense from 0)", codec, p, off, wantOffset)
			}
			last, wantOffset = i, wantOffset+1
			seen++
		}
	}
	if seen != len(lines) {
		t.Fatalf("%s: read back %d lines of %d", codec, seen, len(lines))
	}
}

// kcatOffsetsForTimes checks kcat -Q: the first offset at or after a time between two
// produces, and none after the last.
func kcatOffsetsForTimes(t *testing.T, bootstrap, topic string) {
	t.Helper()
	produce := func(tag string) {
		kcat(t, strings.Join(kcatLines(tag, 10), "\n")+"\n", "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-K", ":")
	}
	produce("before")
	time.Sleep(50 * time.Millisecond)
	between := time.Now().UnixMilli()
	time.Sleep(50 * time.Millisecond)
	produce("after")
	query := func(ts int64) string {
		out := kcat(t, "", "-b", bootstrap, "-Q", "-t", fmt.Sprintf("%s:0:%d", topic, ts))
		return strings.TrimSpace(out)
	}
	if got, want := query(between), fmt.Sprintf("%s [0] offset 10", topic); got != want {
		t.Fatalf("kcat -Q at a time between the produces: %q, want %q", got, want)
	}
	if got, want := query(time.Now().Add(time.Hour).UnixMilli()), fmt.Sprintf("%s [0] offset -1", topic); got != want {
		t.Fatalf("kcat -Q after the last record: %q, want %q", got, want)
	}
}

// kcatRecords runs the kcat checks against a node's Kafka address; topics are made over
// HTTP at its base URL.
func kcatRecords(t *testing.T, httpURL, bootstrap string) {
	t.Helper()
	cl := client.New(httpURL)
	for _, codec := range kcatCodecs {
		topic := "kcat-" + codec
		if _, err := cl.CreateTopic(t.Context(), topic, 4, nil); err != nil {
			t.Fatal(err)
		}
		kcatRoundTrip(t, bootstrap, topic, 4, codec)
	}
	if _, err := cl.CreateTopic(t.Context(), "kcat-times", 1, nil); err != nil {
		t.Fatal(err)
	}
	kcatOffsetsForTimes(t, bootstrap, "kcat-times")
}
