# ccache in front of the compiler; the sloppiness settings let it cache translation units that
# use precompiled headers. CCACHE_BASEDIR makes paths inside the source tree relative, so a second
# clone of the project (CI's fresh clone, a worktree) hits the objects the first one cached.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}"
      ${CCACHE_PROGRAM})
endif()
