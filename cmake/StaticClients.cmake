# SPDX-License-Identifier: Apache-2.0
# Programs started once per command or per node (`cohort`, `cohort-stepd`)
# link gRPC, protobuf and abseil statically. Dynamically, the loader maps
# about 58 shared libraries and resolves some 15,000 symbols before main():
# 20-30 ms per `cohort` command on a small VM, most of a submission's time.
# The long-running daemons and the tests keep the shared libraries.
#
# Usage: cohort_static_deps(TARGET) on an executable. Libraries whose link
# interface names COHORT_RPC_LIBS / COHORT_ABSL_LIBS (below) then give that
# executable the static archives instead of the shared imported targets.
option(COHORT_STATIC_CLIENTS
  "Link cohort and cohort-stepd against static gRPC, protobuf and abseil archives" ON)

set(_cohort_static_wanted
  grpc++ protobuf absl_status absl_statusor absl_strings absl_str_format absl_time)

if(COHORT_STATIC_CLIENTS)
  pkg_check_modules(COHORT_STATIC_PKGS REQUIRED ${_cohort_static_wanted})
  # pkg-config --static lists every library of the closure, system ones
  # included; only those with an archive are linked statically.
  set(_system dl rt m pthread atomic c)
  set(_archives)
  set(_dynamic)
  foreach(lib IN LISTS COHORT_STATIC_PKGS_STATIC_LIBRARIES)
    if(lib IN_LIST _system)
      list(APPEND _dynamic ${lib})
      continue()
    endif()
    unset(_archive)
    find_library(_archive NAMES lib${lib}.a NO_CACHE)
    if(NOT _archive)
      message(FATAL_ERROR "COHORT_STATIC_CLIENTS: no static archive lib${lib}.a; install its -dev "
                          "package or configure with -DCOHORT_STATIC_CLIENTS=OFF")
    endif()
    list(APPEND _archives ${_archive})
  endforeach()
  list(REMOVE_DUPLICATES _archives)
  list(REMOVE_DUPLICATES _dynamic)
  add_library(cohort_static_deps INTERFACE)
  target_link_libraries(cohort_static_deps INTERFACE
    "-Wl,--start-group" ${_archives} "-Wl,--end-group" ${_dynamic} Threads::Threads)
  set(_static "$<BOOL:$<TARGET_PROPERTY:COHORT_STATIC_DEPS>>")
  set(COHORT_RPC_LIBS
    "$<IF:${_static},cohort_static_deps,gRPC::grpc++;protobuf::libprotobuf>")
  set(COHORT_ABSL_LIBS "$<IF:${_static},cohort_static_deps,absl::status;absl::statusor>")
else()
  set(COHORT_RPC_LIBS gRPC::grpc++ protobuf::libprotobuf)
  set(COHORT_ABSL_LIBS absl::status absl::statusor)
endif()

function(cohort_static_deps target)
  if(COHORT_STATIC_CLIENTS)
    set_target_properties(${target} PROPERTIES COHORT_STATIC_DEPS ON)
    # A position-dependent executable needs no relative relocations at
    # start: another third of what remains of the start-up.
    target_link_options(${target} PRIVATE -no-pie)
  endif()
endfunction()
