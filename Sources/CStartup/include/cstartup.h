#ifndef XIDLELOCK_CSTARTUP_H
#define XIDLELOCK_CSTARTUP_H
/* Nothing to call: linking this target replaces the Swift runtime's way of
 * finding argv (see startup.c). */
void xil_startup_linked(void);
#endif
