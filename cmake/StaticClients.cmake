# SPDX-License-Identifier: Apache-2.0
# Programs started once per command or per node (`cohort`, `cohort-stepd`)
# are linked without the shared libraries they can do without. Dynamically,
# the loader maps about 58 shared libraries and resolves some 15,000 symbols
# before main(): 20-30 ms per `cohort` command on a small VM. With gRPC,
# protobuf and abseil static, libstdc++ and fmt were still shared: another
# 2-3 ms of each start (loading, symbol lookups, page faults).
#
# - `cohort` is linked fully static (-static): nothing to load, about a
#   quarter less start-up than with libstdc++ and fmt shared. It links no
#   gRPC (its own HTTP/2 client, cli/transport/grpc_channel.h) and protobuf's lite
#   runtime: gRPC's, OpenSSL's and the full runtime's static initialisers
#   were most of what remained of its start. A static program must not use
#   NSS modules that glibc loads at run time (libnss_systemd, sssd: a
#   lookup that reaches one crashes it), so the command looks up no user
#   (the controller names owners) and resolves controller host names with
#   c-ares, which reads /etc/hosts and DNS itself.
# - `cohort-stepd` runs ranks as their owner, whose account may come from
#   any NSS module (LDAP, sssd): it keeps the shared C library and links
#   libstdc++, libgcc and fmt statically.
# The long-running daemons and the tests keep the shared libraries.
#
# Usage: cohort_static_deps(TARGET [FULLY]) on an executable. Libraries
# whose link interface names COHORT_LITE_LIBS / COHORT_ABSL_LIBS /
# COHORT_YAML_LIBS / COHORT_FMT_LIBS (below) then give that executable the static archives
# instead of the shared imported targets. COHORT_RPC_LIBS (gRPC and the
# full protobuf runtime) are for the daemons, always shared.
option(COHORT_STATIC_CLIENTS
  "Link cohort (fully) and cohort-stepd (all but the C library) statically" ON)

set(_cohort_static_wanted
  protobuf-lite libcares absl_status absl_statusor absl_strings absl_str_format absl_time yaml-0.1)
pkg_check_modules(COHORT_CARES REQUIRED IMPORTED_TARGET libcares)
# libyaml, for topology.yaml (src/config/topology_yaml.cpp).
pkg_check_modules(COHORT_YAML REQUIRED IMPORTED_TARGET yaml-0.1)
set(COHORT_RPC_LIBS gRPC::grpc++ protobuf::libprotobuf)

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
  set(COHORT_LITE_LIBS
    "$<IF:${_static},cohort_static_deps,protobuf::libprotobuf-lite;PkgConfig::COHORT_CARES>")
  set(COHORT_ABSL_LIBS "$<IF:${_static},cohort_static_deps,absl::status;absl::statusor>")
  set(COHORT_YAML_LIBS "$<IF:${_static},cohort_static_deps,PkgConfig::COHORT_YAML>")
  # fmt's compiled part from its headers (fmt_static.cpp); the objects that
  # use fmt are compiled alike either way.
  add_library(cohort_fmt_static STATIC ${CMAKE_CURRENT_LIST_DIR}/fmt_static.cpp)
  target_include_directories(cohort_fmt_static SYSTEM PUBLIC
    $<TARGET_PROPERTY:fmt::fmt,INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_features(cohort_fmt_static PUBLIC cxx_std_20)
  set(COHORT_FMT_LIBS "$<IF:${_static},cohort_fmt_static,fmt::fmt>")
  # OpenSSL: its archives in the static programs; the daemons share the
  # libraries gRPC itself links, so that one OpenSSL is in each process.
  find_library(COHORT_SSL_ARCHIVE NAMES libssl.a REQUIRED)
  find_library(COHORT_CRYPTO_ARCHIVE NAMES libcrypto.a REQUIRED)
  set(COHORT_SSL_LIBS
    "$<IF:${_static},${COHORT_SSL_ARCHIVE};${COHORT_CRYPTO_ARCHIVE},OpenSSL::SSL;OpenSSL::Crypto>")
else()
  set(COHORT_LITE_LIBS protobuf::libprotobuf-lite PkgConfig::COHORT_CARES)
  set(COHORT_ABSL_LIBS absl::status absl::statusor)
  set(COHORT_YAML_LIBS PkgConfig::COHORT_YAML)
  set(COHORT_FMT_LIBS fmt::fmt)
  set(COHORT_SSL_LIBS OpenSSL::SSL OpenSSL::Crypto)
endif()

function(cohort_static_deps target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "FULLY" "" "")
  if(COHORT_STATIC_CLIENTS)
    set_target_properties(${target} PROPERTIES COHORT_STATIC_DEPS ON)
    # A position-dependent executable needs no relative relocations at
    # start: another third of what remains of the start-up.
    target_link_options(${target} PRIVATE -no-pie)
    if(arg_FULLY)
      # glibc warns at link time about each NSS function (getpwuid_r,
      # getaddrinfo, ...) in a static program; they are expected (above).
      target_link_options(${target} PRIVATE -static -Wl,--no-warnings)
    else()
      target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
    endif()
  endif()
endfunction()
