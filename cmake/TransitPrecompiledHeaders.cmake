# Nearly every translation unit of Transit includes the same standard and fmt
# headers: parsing them is a third to a half of its compile time.  Each target
# with several C++ sources gets them precompiled once (its own copy, made with
# its own flags, so a user's flags cannot make it invalid); the GoogleTest
# programs share one (tests/CMakeLists.txt).  TRANSIT_PRECOMPILE_HEADERS=OFF
# turns this off (a compiler cache without the sloppiness PCH needs, or
# include-what-you-use checks).
option(TRANSIT_PRECOMPILE_HEADERS "Precompile the common standard and fmt headers" ON)

set(TRANSIT_COMMON_HEADERS
  <algorithm> <array> <atomic> <chrono> <cstddef> <cstdint> <cstring> <functional> <map>
  <memory> <mutex> <optional> <random> <set> <span> <string> <string_view> <thread>
  <unordered_map> <utility> <vector> <fmt/format.h>)

# The list for target_precompile_headers, C++ sources only (a target may hold
# C); empty when precompiled headers are off.
function(transit_common_pch_list out)
  set(list "")
  if(NOT TRANSIT_PRECOMPILE_HEADERS)
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  foreach(header IN LISTS TRANSIT_COMMON_HEADERS)
    list(APPEND list "$<$<COMPILE_LANGUAGE:CXX>:${header}>")
  endforeach()
  set(${out} ${list} PARENT_SCOPE)
endfunction()

function(_transit_targets_in dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(children DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(child IN LISTS children)
    _transit_targets_in(${child} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Called once, after every target exists: each executable or library of the
# project with at least `min_sources` C++ sources and no precompiled header of
# its own gets the common one.  A target with one or two sources would spend
# more making it than it saves.
function(transit_precompile_common_headers)
  if(NOT TRANSIT_PRECOMPILE_HEADERS)
    return()
  endif()
  set(min_sources 3)
  transit_common_pch_list(headers)
  _transit_targets_in(${PROJECT_SOURCE_DIR} targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY|STATIC_LIBRARY|OBJECT_LIBRARY)$")
      continue()
    endif()
    get_target_property(own ${target} PRECOMPILE_HEADERS)
    get_target_property(reused ${target} PRECOMPILE_HEADERS_REUSE_FROM)
    if(own OR reused)
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.(cpp|cc|cxx)$")
    list(LENGTH sources count)
    if(count GREATER_EQUAL min_sources)
      target_precompile_headers(${target} PRIVATE ${headers})
    endif()
  endforeach()
endfunction()
