# SPDX-License-Identifier: Apache-2.0
# Compiler settings shared by every Cohort target, and the check that keeps the
# pure core free of I/O frameworks.

option(COHORT_WERROR "Treat warnings as errors" OFF)
option(COHORT_SANITIZE "Build with address and undefined-behaviour sanitizers" OFF)
# The scheduling core counts GPU masks in its inner loops. x86-64's baseline
# has no bit-count instruction (every x86-64 server CPU since 2008 does);
# turn this off only for older CPUs.
option(COHORT_POPCNT "On x86-64, compile the scheduling core for the POPCNT instruction" ON)

add_library(cohort_warnings INTERFACE)
target_compile_options(cohort_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow
  -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
  -Wimplicit-fallthrough)
if(COHORT_WERROR)
  target_compile_options(cohort_warnings INTERFACE -Werror)
endif()

if(COHORT_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# cohort_assert_pure(TARGET FORBIDDEN...) fails the configure step when TARGET
# links, directly or through its dependencies, a library whose name contains
# one of FORBIDDEN. The core must stay free of gRPC, protobuf and Asio so that
# its decisions stay deterministic and testable without I/O.
function(cohort_assert_pure target)
  set(seen "")
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue current)
    if(current IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${current})
    if(NOT TARGET ${current})
      continue()
    endif()
    get_target_property(libs ${current} LINK_LIBRARIES)
    get_target_property(ilibs ${current} INTERFACE_LINK_LIBRARIES)
    foreach(lib IN LISTS libs ilibs)
      if(NOT lib OR lib MATCHES "-NOTFOUND$")
        continue()
      endif()
      foreach(bad IN LISTS ARGN)
        string(TOLOWER "${lib}" lower)
        if(lower MATCHES "${bad}")
          message(FATAL_ERROR "${target} must stay pure but links ${lib} (through ${current}); "
            "move the code that needs it into daemons/ or cli/")
        endif()
      endforeach()
      list(APPEND queue ${lib})
    endforeach()
  endwhile()
endfunction()
