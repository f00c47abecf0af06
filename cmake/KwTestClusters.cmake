# KW_TEST_CLUSTERS_DIR: where the tests' PostgreSQL clusters live (the one the
# db tests share, the e2e tests' seed and their copies of it, a first start's).
# tmpfs where it has room: on the 2-core CI VM's ext4 a test database
# (CREATE DATABASE ... TEMPLATE) takes 0.7 s and on /dev/shm 0.1 s, and every
# db test makes one. The shared cluster's WAL may reach max_wal_size (1 GiB)
# between checkpoints, hence the 4 GiB asked for.
set(_kw_clusters ${CMAKE_BINARY_DIR}/test-clusters)
if(IS_DIRECTORY /dev/shm)
  execute_process(COMMAND df --output=avail -k /dev/shm
                  OUTPUT_VARIABLE _kw_shm_avail RESULT_VARIABLE _kw_df_status ERROR_QUIET)
  string(REGEX MATCH "[0-9]+" _kw_shm_kib "${_kw_shm_avail}")
  if(_kw_df_status EQUAL 0 AND _kw_shm_kib GREATER_EQUAL 4194304)
    # One folder per build tree: two checkouts' tests never share a cluster.
    string(SHA1 _kw_build_id ${CMAKE_BINARY_DIR})
    string(SUBSTRING ${_kw_build_id} 0 12 _kw_build_id)
    set(_kw_clusters /dev/shm/kw-test-clusters-${_kw_build_id})
  endif()
endif()
set(KW_TEST_CLUSTERS_DIR ${_kw_clusters} CACHE PATH
    "Where tests make PostgreSQL clusters (tmpfs where it has 4 GiB free, else the build tree)")
