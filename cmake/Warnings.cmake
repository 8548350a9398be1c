# Project-wide warning set, applied to moejit's own targets only.
function(moejit_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                         -Wno-sign-conversion -Werror=return-type)
endfunction()
