package egress

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	p, err := Parse([]string{"hooks.example.com", "*.fn.example.net", "203.0.113.0/24", "127.0.0.1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for raw, ok := range map[string]bool{
		"https://hooks.example.com/x":       true,
		"https://a.fn.example.net/x":        true,
		"https://203.0.113.9:8443/":         true,
		"https://127.0.0.1/":                true,
		"http://hooks.example.com/x":        false, // plain HTTP without the allow
		"https://other.example.com/":        false,
		"https://10.0.0.1/":                 false,
		"https://169.254.169.254/latest":    false,
		"https://user:pw@hooks.example.com": false,
		"ftp://hooks.example.com/":          false,
		"/relative":                         false,
	} {
		err := p.CheckURL(raw)
		if (err == nil) != ok || err != nil && !errors.Is(err, ErrNotAllowed) {
			t.Errorf("%s: %v, want allowed %v", raw, err, ok)
		}
	}
	insecure, _ := Parse([]string{"127.0.0.1"}, true)
	if err := insecure.CheckURL("http://127.0.0.1:8080/"); err != nil {
		t.Fatalf("plain HTTP with the allow: %v", err)
	}
	var none *Policy
	if err := none.CheckURL("https://hooks.example.com/"); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("no policy: %v", err)
	}
}

// TestDialChecked: a host name the list allows that resolves (here: is) a loopback
// address is refused at the dial — the check is on the address dialled — unless a CIDR
// lists the address; redirects are answers, never followed.
func TestDialChecked(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		fmt.Fprint(w, strings.Repeat("x", 2*MaxAnswer))
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	named, _ := Parse([]string{"localhost"}, true)
	if err := named.CheckURL("http://localhost:" + port + "/"); err != nil {
		t.Fatalf("the URL check: %v", err)
	}
	if _, err := named.Client().Get("http://localhost:" + port + "/"); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("dialling loopback by an allowed name: %v, want ErrNotAllowed", err)
	}
	listed, _ := Parse([]string{"127.0.0.0/8", "::1/128"}, true)
	res, err := listed.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatalf("a listed CIDR: %v", err)
	}
	if n := len(ReadAnswer(res.Body)); n != MaxAnswer {
		t.Fatalf("read %d bytes of the answer, want the bound %d", n, MaxAnswer)
	}
	res, err = listed.Client().Get(srv.URL + "/redirect")
	if err != nil || res.StatusCode != http.StatusFound {
		t.Fatalf("redirect: %v %v, want the 302 itself", res, err)
	}
	res.Body.Close()
}
