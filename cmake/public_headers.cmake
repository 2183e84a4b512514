# encore_public_headers(<out> <source dir> <header>...): the given headers and every project
# header they include, directly or not (quoted includes, relative to the source dir). A quoted
# include that is not a project header is an error: an installed header could not find it.
function(encore_public_headers out source_dir)
  set(pending ${ARGN})
  set(found "")
  while(pending)
    list(POP_FRONT pending header)
    list(FIND found ${header} seen)  # not IN_LIST: install scripts run under CMake's old policies
    if(seen GREATER -1)
      continue()
    endif()
    if(NOT EXISTS "${source_dir}/${header}")
      message(FATAL_ERROR "encore: public header ${header} (included by a public header) is not "
                          "in ${source_dir}; quoted includes are relative to the source root")
    endif()
    list(APPEND found ${header})
    file(STRINGS "${source_dir}/${header}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" included "${line}")
      list(APPEND pending ${included})
    endforeach()
  endwhile()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
