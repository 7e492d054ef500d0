#pragma once
// A fault-injection hook for tests of the stalled-engine path (issue 10): a model runner that
// wraps the real one and, while a given file exists, blocks at the start of every forward
// pass. The engine then makes no progress: health turns NOT_SERVING after --stall-timeout and
// new requests get UNAVAILABLE; removing the file lets the step finish and the server recover.
// Enabled only by the hidden flag --fault-stall-file (never in production configurations).
#include <memory>
#include <string>

#include "model/runner.h"

namespace flashserve::api {

std::unique_ptr<model::ModelRunner> with_stall_hook(std::unique_ptr<model::ModelRunner> runner,
                                                    std::string stall_file);

}  // namespace flashserve::api
