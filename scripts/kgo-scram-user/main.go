// Command kgo-scram-user makes a SCRAM user through Kafka's AlterUserScramCredentials
// (franz-go's kadm salts the password on the client, as Kafka's tools do), for
// scripts/kgo-suite.sh: franz-go's TestSCRAMAuth logs in as it.
//
//	go run ./scripts/kgo-scram-user -seeds 127.0.0.1:9092 -user kgo -password kgo-secret -mechanism 256
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	seeds := flag.String("seeds", "127.0.0.1:9092", "Kafka seed brokers, comma-separated")
	user := flag.String("user", "", "the SCRAM user")
	password := flag.String("password", "", "its password")
	mechanism := flag.Int("mechanism", 256, "256 (SCRAM-SHA-256) or 512 (SCRAM-SHA-512)")
	iterations := flag.Int("iterations", 8192, "PBKDF2 iterations, 4096 to 16384")
	flag.Parse()
	if err := run(*seeds, *user, *password, *mechanism, *iterations); err != nil {
		fmt.Fprintln(os.Stderr, "kgo-scram-user:", err)
		os.Exit(1)
	}
}

func run(seeds, user, password string, mechanism, iterations int) error {
	if user == "" || password == "" {
		return fmt.Errorf("-user and -password are required")
	}
	m := kadm.ScramSha256
	if mechanism == 512 {
		m = kadm.ScramSha512
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m,
		Iterations: int32(iterations), Password: password}})
	if err != nil {
		return fmt.Errorf("alter SCRAM credentials: %w", err)
	}
	if err := res.Error(); err != nil {
		return fmt.Errorf("alter SCRAM credentials: %w", err)
	}
	fmt.Printf("SCRAM-SHA-%d user %s set\n", mechanism, user)
	return nil
}
