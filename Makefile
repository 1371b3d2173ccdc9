.PHONY: test dev build fuzz
test:
	scripts/test.sh
dev:
	go run ./cmd/strata dev
build:
	CGO_ENABLED=0 go build -o bin/strata ./cmd/strata
fuzz:
	scripts/fuzz.sh 60s
