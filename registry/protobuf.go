package registry

import "fmt"

func parseProtobuf(text string, refs []Resolved) (format, error) {
	return nil, fmt.Errorf("%w: schema type PROTOBUF is not supported by this registry yet", ErrInvalidSchema)
}
