# A cheat: a constructor, code that runs before main (where it could read the grader's
# token or redirect the program's output). The file is refused whatever it computes.
$a\
__attribute__((constructor)) static void before_main(void) { }
