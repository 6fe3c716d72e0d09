# Writes OUT: a C++ file defining servegym_core::source_hash(), the SHA-256 of the core's sources.
# servegym_core/_build.py computes the same digest: for each file, sorted by its path relative to
# ROOT, the line "<path> <sha256 of its bytes>\n"; the digest is the SHA-256 of those lines.
file(GLOB_RECURSE files RELATIVE "${ROOT}"
  "${ROOT}/src/*.cpp" "${ROOT}/src/*.hpp" "${ROOT}/bind/*.cpp" "${ROOT}/bind/*.hpp")
list(SORT files)
set(lines "")
foreach(f IN LISTS files)
  file(SHA256 "${ROOT}/${f}" digest)
  string(APPEND lines "${f} ${digest}\n")
endforeach()
string(SHA256 total "${lines}")
set(content "namespace servegym_core { const char* source_hash() { return \"${total}\"; } }\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
