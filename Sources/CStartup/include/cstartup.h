#ifndef XIDLELOCK_CSTARTUP_H
#define XIDLELOCK_CSTARTUP_H
/* Nothing to call: linking this target replaces the Swift runtime's way of
 * finding argv (see startup.c). */
void xil_startup_linked(void);
/* argv as the executable's constructors got it (count in *argc), without the
 * runtime's CommandLine global: `xidlelock idle` reads it before anything else. */
char **xil_startup_arguments(int *argc);
#endif
