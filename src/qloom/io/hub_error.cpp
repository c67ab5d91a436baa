#include "qloom/io/hub_error.h"

namespace qloom::io {
namespace {

ErrorKind kind_of(HubFailure f) {
  switch (f) {
    case HubFailure::kUnauthorized:
    case HubFailure::kForbidden:
    case HubFailure::kChecksum:
    case HubFailure::kBadResponse: return ErrorKind::kInvalidInput;
    case HubFailure::kDiskSpace:
    case HubFailure::kCacheWrite: return ErrorKind::kIo;
    default: return ErrorKind::kNotFound;
  }
}

}  // namespace

const char* hub_failure_name(HubFailure f) {
  switch (f) {
    case HubFailure::kRepoNotFound: return "repo_not_found";
    case HubFailure::kRevisionNotFound: return "revision_not_found";
    case HubFailure::kFileNotFound: return "file_not_found";
    case HubFailure::kUnauthorized: return "unauthorized";
    case HubFailure::kForbidden: return "forbidden";
    case HubFailure::kNetwork: return "network";
    case HubFailure::kNotCached: return "not_cached";
    case HubFailure::kInterrupted: return "interrupted";
    case HubFailure::kChecksum: return "checksum";
    case HubFailure::kBadResponse: return "bad_response";
    case HubFailure::kDiskSpace: return "disk_space";
    case HubFailure::kCacheWrite: return "cache_write";
  }
  return "unknown";
}

HubError::HubError(HubFailure failure, std::string where, std::string item, std::string message,
                   std::string remedy)
    : Error(kind_of(failure), std::move(where), std::move(item), std::move(message),
            std::move(remedy)),
      failure_(failure) {}

}  // namespace qloom::io
