// HubError: a qloom::Error raised while resolving or downloading a Hugging Face
// Hub model, with the reason as an enum so callers (the agent) can map it to
// their own outcomes without parsing messages. The CLI treats it as any Error.
#pragma once

#include <string>

#include "qloom/core/error.h"

namespace qloom::io {

enum class HubFailure {
  kRepoNotFound,      // 404 (RepoNotFound) on the repo             -> kNotFound
  kRevisionNotFound,  // 404 (RevisionNotFound)                      -> kNotFound
  kFileNotFound,      // 404 on a file of an existing repo           -> kNotFound
  kUnauthorized,      // 401: private, or a token is needed/invalid  -> kInvalidInput
  kForbidden,         // 403: gated repo without accepted access     -> kInvalidInput
  kNetwork,           // cannot reach the endpoint, nothing cached   -> kNotFound
  kNotCached,         // offline mode and the cache lacks the files  -> kNotFound
  kInterrupted,       // transfer cut mid-file; partial kept         -> kNotFound
  kChecksum,          // bytes do not match the hub's sha256 / etag  -> kInvalidInput
  kBadResponse,       // 5xx, missing X-Repo-Commit / ETag, bad JSON -> kInvalidInput
  kDiskSpace,         // not enough free space for the download      -> kIo
  kCacheWrite,        // the cache directory cannot be written       -> kIo
};

const char* hub_failure_name(HubFailure f);  // "repo_not_found", "network", ...

class HubError : public Error {
 public:
  // `where`: "org/name@rev" or a URL; `item`: the file inside the repo, may be empty.
  HubError(HubFailure failure, std::string where, std::string item, std::string message,
           std::string remedy = {});
  HubFailure failure() const { return failure_; }

 private:
  HubFailure failure_;
};

}  // namespace qloom::io
