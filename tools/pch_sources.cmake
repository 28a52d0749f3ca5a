# attnviz_check_pch_sources(DIR): fails the configure step when a source file of a target
# that uses a precompiled header has its own COMPILE_OPTIONS or COMPILE_FLAGS but does not
# set SKIP_PRECOMPILE_HEADERS. Such options (OpenMP, -fopenmp-simd) change how the file is
# compiled, and the header was compiled without them: GCC uses it or drops it with a warning
# (-fopenmp-simd the first, -fopenmp the second), clang refuses it (clang 14, the fuzz
# preset's compiler, crashes printing why). Walks DIR and every directory below it.
# Included by the top-level CMakeLists.txt; its self-test is tests/support/pch_check.
function(attnviz_check_pch_sources dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY")
      continue()
    endif()
    get_target_property(pch ${target} PRECOMPILE_HEADERS)
    get_target_property(pch_from ${target} PRECOMPILE_HEADERS_REUSE_FROM)
    if(NOT pch AND NOT pch_from)
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    foreach(source IN LISTS sources)
      if(source MATCHES "^\\$<")  # $<TARGET_OBJECTS:...>: not a file of this target
        continue()
      endif()
      # A relative name is the target's directory's, not the caller's.
      cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY "${dir}")
      get_property(skip SOURCE "${source}" TARGET_DIRECTORY ${target} PROPERTY SKIP_PRECOMPILE_HEADERS)
      if(skip)
        continue()
      endif()
      foreach(property COMPILE_OPTIONS COMPILE_FLAGS)
        get_property(own SOURCE "${source}" TARGET_DIRECTORY ${target} PROPERTY ${property})
        if(own)
          message(FATAL_ERROR "${source} (target ${target}) has its own ${property} \"${own}\" but uses the "
                  "precompiled header, which was compiled without them: set SKIP_PRECOMPILE_HEADERS ON for it.")
        endif()
      endforeach()
    endforeach()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    attnviz_check_pch_sources("${subdir}")
  endforeach()
endfunction()
