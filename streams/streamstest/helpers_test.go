package streamstest_test

import (
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/window"
)

func jsonResult() serde.Serde[window.Result[int64]] { return serde.JSON[window.Result[int64]]() }
