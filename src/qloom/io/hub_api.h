// The two hub requests qloom makes before downloading, and how hub HTTP
// failures become HubErrors:
//   GET  {endpoint}/api/models/{org}/{name}/revision/{rev}?blobs=true
//        -> the commit and the repo's files (huggingface_hub's repo_info)
//   HEAD {endpoint}/{org}/{name}/resolve/{rev}/{file}
//        -> X-Repo-Commit, X-Linked-Etag / ETag, X-Linked-Size / Content-Length,
//           and for LFS files a redirect to the bytes (huggingface_hub's
//           get_hf_file_metadata; redirects that leave the host are not followed)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qloom/io/hub_env.h"
#include "qloom/io/hub_http.h"
#include "qloom/io/hub_id.h"

namespace qloom::io {

struct HubRepoFile {
  std::string name;                   // path in the repo ("config.json", "a/b.bin")
  std::optional<uint64_t> size;       // when the listing gives it
  std::string lfs_sha256;             // "" for regular (non-LFS) files
};

struct HubListing {
  std::string commit;
  std::vector<HubRepoFile> files;
};

struct HubFileMeta {
  std::string name;
  std::string commit;              // X-Repo-Commit
  std::string etag;                // X-Linked-Etag or ETag, without W/ and quotes
  std::optional<uint64_t> size;    // X-Linked-Size, else Content-Length of a 200
  std::string url;                 // where to GET the bytes (redirect target for LFS)
};

// The most bytes qloom downloads for a hub text file (configs, tokenizer
// files, indexes, chat templates, READMEs: is_hub_text_file), whatever the
// server announces; bigger announcements are refused before any byte is read.
inline constexpr uint64_t kMaxHubTextFileBytes = 64ull << 20;

// JSON, Jinja, text, Markdown and YAML files and tokenizer files.
bool is_hub_text_file(const std::string& name);

// Settles the size a download of `m` may write, before it starts: the
// listing's size (`listed`) when the listing gives one (the headers must
// agree with it), else the headers'. A text file announced bigger than
// kMaxHubTextFileBytes, or a listing and headers that disagree, or a weight
// file with no size from either, is HubError(kBadResponse) naming the file
// and the size.
void settle_hub_file_size(HubFileMeta& m, std::optional<uint64_t> listed, const HubId& id);

// The most bytes a download of `m` may write: its size when known, else
// kMaxHubTextFileBytes.
uint64_t hub_download_limit(const HubFileMeta& m);

// Throws HubError (see hub_error.h for the reasons) on any failure.
HubListing fetch_listing(HttpClient& http, const HubSettings& s, const HubId& id);
HubFileMeta fetch_file_meta(HttpClient& http, const HubSettings& s, const HubId& id,
                            const std::string& revision, const std::string& file);

// The resolve URL of one file.
std::string hub_file_url(const std::string& endpoint, const HubId& id, const std::string& revision,
                         const std::string& file);

// Turns a failed exchange (transport error or HTTP status >= 400, or any
// unexpected status) into the matching HubError. `file` is "" for repo-level
// requests.
[[noreturn]] void throw_hub_http_error(const HttpResult& r, const HubSettings& s, const HubId& id,
                                       const std::string& file);

// The ETag header value without a weak "W/" prefix and surrounding quotes.
std::string normalize_etag(const std::string& etag);

}  // namespace qloom::io
