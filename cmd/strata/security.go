package main

import (
	"errors"
	"fmt"

	catopen "github.com/strata-io/strata/catalog/open"
)

// catalogFlag applies catalog/open's rule to a --catalog value (with params added to a
// Postgres DSN unless it sets them), phrased for the command line.
func catalogFlag(value string, o catopen.Options, params map[string]string) (catopen.Target, error) {
	if value == "" {
		return catopen.Target{}, errors.New("--catalog is required: e.g. --catalog 'postgres://strata:PASSWORD@db:5432/strata?sslmode=verify-full', or a SQLite file for a single node (--catalog sqlite:./catalog.db --create); or set STRATA_CATALOG")
	}
	t, err := catopen.Parse(value, o)
	if err == nil {
		t, err = t.WithParams(params)
	}
	if err != nil {
		return catopen.Target{}, fmt.Errorf("--%w", err) // "--catalog "x": why: usage"
	}
	return t, nil
}
