package streams

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/strata-io/strata/client"
)

// The interactive queries' HTTP handler, which the application mounts where
// Config.ApplicationServer points (strip any prefix with http.StripPrefix):
//
//	GET /stores/{store}/keys/{key}        the value of key: 200, 404 key_not_found
//	GET /stores/{store}/keys/{key}/owner  which instance holds key
//	GET /stores/{store}/range?from=&to=&limit=&partition=
//	                                      entries from <= key < to, in key order
//	GET /instances                        the routing table
//
// Keys are the stored (encoded) bytes: the path segment's text, or base64url with
// ?key_encoding=base64 (from and to likewise); values are base64 in JSON. A key held
// by another instance is asked of it (once: the answer is its own tasks'). A task
// restoring or moving answers 503 with code not_available and Retry-After, never a
// stale or a missing value. Errors are application/problem+json with a stable code.

// keyAnswer is a key lookup's answer.
type keyAnswer struct {
	Store     string `json:"store"`
	Key       []byte `json:"key"`
	Value     []byte `json:"value"`
	Partition int32  `json:"partition"`
	Instance  string `json:"instance"`
}

type rangeEntry struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
}

// rangeAnswer is a range lookup's answer.
type rangeAnswer struct {
	Store   string       `json:"store"`
	Entries []rangeEntry `json:"entries"`
}

// maxRangeLimit bounds one range answer.
const maxRangeLimit = 10_000

// QueryHandler serves interactive queries of this instance's stores (see above).
func (a *App) QueryHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stores/{store}/keys/{key}", a.serveKey)
	mux.HandleFunc("GET /stores/{store}/keys/{key}/owner", a.serveOwner)
	mux.HandleFunc("GET /stores/{store}/range", a.serveRange)
	mux.HandleFunc("GET /instances", func(w http.ResponseWriter, r *http.Request) { writeQueryJSON(w, a.Instances()) })
	return mux
}

func writeQueryJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(queryProblem{Status: status, Code: code, Title: http.StatusText(status), Detail: detail})
}

// queryError answers err: not available, no such store, or an internal failure.
func queryError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotAvailable):
		writeProblem(w, http.StatusServiceUnavailable, "not_available", err.Error())
	case errors.Is(err, ErrNotQueryable):
		writeProblem(w, http.StatusNotFound, "store_not_found", err.Error()+" (key-value stores and global tables are queryable)")
	default:
		writeProblem(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// keyParam decodes a key given in the path or a query parameter.
func keyParam(r *http.Request, s string) ([]byte, error) {
	switch enc := r.URL.Query().Get("key_encoding"); enc {
	case "", "string":
		return []byte(s), nil
	case "base64":
		if b, err := base64.RawURLEncoding.DecodeString(s); err == nil {
			return b, nil
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not base64", s)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("key_encoding %q: use string (the default) or base64", enc)
	}
}

func (a *App) serveKey(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("store")
	key, err := keyParam(r, r.PathValue("key"))
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	qs, err := a.queryable(name)
	if err != nil {
		queryError(w, err)
		return
	}
	ans := keyAnswer{Store: name, Key: key, Partition: -1, Instance: a.cfg.InstanceID}
	var found bool
	switch {
	case qs.sub < 0:
		ans.Value, found, err = a.localGet(qs, TaskID{}, key)
	case r.Header.Get(forwardedHeader) != "":
		// Forwarded by an instance that believes this one runs the task: answer
		// from this instance's tasks only.
		n, ok := a.taskCount(qs.sub)
		if !ok {
			queryError(w, fmt.Errorf("%w: the application has not started", ErrNotAvailable))
			return
		}
		ans.Partition = client.KeyPartition(key, n)
		ans.Value, found, err = a.localGet(qs, TaskID{qs.sub, ans.Partition}, key)
	default:
		var o Owner
		if o, err = a.KeyOwner(name, key); err == nil {
			ans.Partition, ans.Instance = o.Partition, o.Instance
			ans.Value, found, err = a.Get(r.Context(), name, key)
		}
	}
	if err != nil {
		queryError(w, err)
		return
	}
	if !found {
		writeProblem(w, http.StatusNotFound, "key_not_found", fmt.Sprintf("store %s has no value for the key", name))
		return
	}
	writeQueryJSON(w, ans)
}

func (a *App) serveOwner(w http.ResponseWriter, r *http.Request) {
	key, err := keyParam(r, r.PathValue("key"))
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	o, err := a.KeyOwner(r.PathValue("store"), key)
	if err != nil {
		queryError(w, err)
		return
	}
	writeQueryJSON(w, o)
}

func (a *App) serveRange(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("store")
	q := r.URL.Query()
	var from, to []byte
	var err error
	if s := q.Get("from"); s != "" {
		if from, err = keyParam(r, s); err != nil {
			writeProblem(w, http.StatusBadRequest, "bad_request", "from: "+err.Error())
			return
		}
	}
	if s := q.Get("to"); s != "" {
		if to, err = keyParam(r, s); err != nil {
			writeProblem(w, http.StatusBadRequest, "bad_request", "to: "+err.Error())
			return
		}
	}
	limit := 1000
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit <= 0 || limit > maxRangeLimit {
			writeProblem(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("limit %q: want 1 to %d", s, maxRangeLimit))
			return
		}
	}
	qs, err := a.queryable(name)
	if err != nil {
		queryError(w, err)
		return
	}
	var kvs []KeyValue[[]byte, []byte]
	if s := q.Get("partition"); s != "" && qs.sub >= 0 {
		p, perr := strconv.ParseInt(s, 10, 32)
		n, ok := a.taskCount(qs.sub)
		if !ok {
			queryError(w, fmt.Errorf("%w: the application has not started", ErrNotAvailable))
			return
		}
		if perr != nil || p < 0 || int32(p) >= n {
			writeProblem(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("partition %q: store %s has partitions 0 to %d", s, name, n-1))
			return
		}
		if r.Header.Get(forwardedHeader) != "" {
			kvs, err = a.localRange(qs, TaskID{qs.sub, int32(p)}, from, to, limit)
		} else {
			kvs, err = a.partitionRange(r.Context(), qs, int32(p), from, to, limit)
		}
	} else {
		kvs, err = a.Range(r.Context(), name, from, to, limit)
	}
	if err != nil {
		queryError(w, err)
		return
	}
	ans := rangeAnswer{Store: name, Entries: make([]rangeEntry, len(kvs))}
	for i, kv := range kvs {
		ans.Entries[i] = rangeEntry{kv.Key, kv.Value}
	}
	writeQueryJSON(w, ans)
}
