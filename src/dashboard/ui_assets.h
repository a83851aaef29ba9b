// The dashboard page's files (ui/*.html, ui/*.js, ui/*.css at the repository root), built
// into the binary at compile time by embed_ui_assets.cmake: GET /ui serves them with no
// file system or network access at run time.
#pragma once

#include <string_view>

namespace llmserve::dashboard {

struct UiAsset {
  std::string_view name;          // file name, e.g. "app.js"
  std::string_view content_type;  // from the extension, e.g. "text/javascript; charset=utf-8"
  std::string_view body;
};

/// The asset named `name` (a file name without folders), or nullptr.
const UiAsset* find_ui_asset(std::string_view name);

}  // namespace llmserve::dashboard
