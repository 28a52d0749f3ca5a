# How the project builds fast on few cores (README, "On a fresh Debian 12 machine": figures).
# Included by the top-level CMakeLists.txt before any target is made. Three levers, each an
# option, each used only where its tool is present:
#
#   ATTNVIZ_UNITY_BUILD  compile each target's sources in batches of ATTNVIZ_UNITY_BATCH
#                        files (CMake's unity build). With GCC, a file that loads the
#                        LibTorch precompiled header spends ~11 s of CPU on it before its
#                        own code: GCC instantiates the header's pending templates again in
#                        every file. A batch pays that once. Names in anonymous namespaces
#                        must therefore be unique within a target's batch: where two files
#                        of one target define the same one, the target's CMakeLists.txt
#                        lists one of them with SKIP_UNITY_BUILD_INCLUSION (a compile error
#                        "redefinition of ..." in a unity_N_cxx.cxx file means that). Which
#                        files share a batch changes as files are added, so the test "build
#                        check: unity names" (tests/support/check_unity_names.py) looks for
#                        such pairs among all the files of each target.
#                        Editing one file rebuilds its batch: turn it off (-D...=OFF) for
#                        long edit-compile sessions on one file.
#   ATTNVIZ_CCACHE       compile through ccache when installed (Debian's ccache; setup.sh
#                        installs it): a rebuild of an unchanged tree, e.g. a fresh build
#                        directory or after `git pull`, takes seconds. The precompiled headers
#                        need ccache's sloppiness pch_defines,time_macros, set here for these
#                        compiles only (added to the user's own setting, which stays as is).
#   ATTNVIZ_LINKER       mold, lld or default; auto (the default) takes mold, else lld, where
#                        the compiler accepts it. The links against LibTorch are large.
option(ATTNVIZ_UNITY_BUILD "Compile each target's sources in batches (one LibTorch header load per batch)" ON)
set(ATTNVIZ_UNITY_BATCH 8 CACHE STRING "Files per unity batch (ATTNVIZ_UNITY_BUILD)")
option(ATTNVIZ_CCACHE "Compile through ccache when it is installed" ON)
set(ATTNVIZ_LINKER auto CACHE STRING "Linker: auto (mold, else lld, else the compiler's), mold, lld or default")
set_property(CACHE ATTNVIZ_LINKER PROPERTY STRINGS auto mold lld default)

if(ATTNVIZ_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE ${ATTNVIZ_UNITY_BATCH})
endif()

# A launcher given on the command line (-DCMAKE_CXX_COMPILER_LAUNCHER=...) wins.
if(ATTNVIZ_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(ATTNVIZ_CCACHE_PROGRAM ccache)
  if(ATTNVIZ_CCACHE_PROGRAM)
    execute_process(COMMAND "${ATTNVIZ_CCACHE_PROGRAM}" --get-config sloppiness
                    OUTPUT_VARIABLE _sloppiness OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    string(REPLACE " " "" _sloppiness "${_sloppiness}")
    string(REPLACE "," ";" _sloppiness "${_sloppiness}")
    list(APPEND _sloppiness pch_defines time_macros)
    list(REMOVE_DUPLICATES _sloppiness)
    list(JOIN _sloppiness "," _sloppiness)
    # base_dir (unless the user set one): paths under the source folder enter the cache key
    # relative to the build folder, so another build folder or another clone of the same tree
    # hits the cache too (a fresh clone beside an old one, a second folder with the same flags).
    execute_process(COMMAND "${ATTNVIZ_CCACHE_PROGRAM}" --get-config base_dir
                    OUTPUT_VARIABLE _base_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(NOT _base_dir)
      set(_base_dir "${CMAKE_SOURCE_DIR}")
    endif()
    set(CMAKE_CXX_COMPILER_LAUNCHER "${CMAKE_COMMAND}" -E env "CCACHE_SLOPPINESS=${_sloppiness}"
        "CCACHE_BASEDIR=${_base_dir}" "${ATTNVIZ_CCACHE_PROGRAM}")
    message(STATUS "attnviz: compiling through ${ATTNVIZ_CCACHE_PROGRAM} (sloppiness ${_sloppiness})")
  endif()
endif()

if(NOT ATTNVIZ_LINKER STREQUAL "default")
  include(CheckLinkerFlag)
  if(ATTNVIZ_LINKER STREQUAL "auto")
    set(_linkers mold lld)
  else()
    set(_linkers ${ATTNVIZ_LINKER})
  endif()
  foreach(_linker IN LISTS _linkers)
    check_linker_flag(CXX "-fuse-ld=${_linker}" ATTNVIZ_HAVE_LD_${_linker})
    if(ATTNVIZ_HAVE_LD_${_linker})
      add_link_options("-fuse-ld=${_linker}")
      message(STATUS "attnviz: linking with ${_linker}")
      break()
    elseif(NOT ATTNVIZ_LINKER STREQUAL "auto")
      message(FATAL_ERROR "ATTNVIZ_LINKER=${ATTNVIZ_LINKER}, but ${CMAKE_CXX_COMPILER} does not link with "
              "-fuse-ld=${_linker} (install it, or use auto or default)")
    endif()
  endforeach()
endif()
