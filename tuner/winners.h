/* winners.h - choosing the variant to dispatch per dispatch key.
 *
 * A dispatch key holds only what the runtime knows on the host, so one key
 * covers several tuned shapes (for decode: every context length of a batch
 * size). The winner is the variant with the least worst-case regret over
 * those shapes: regret(v) = max over shapes s of time(v, s) / best(s). A
 * variant must have a time on every shape of the key to be chosen. Ties go
 * to the smaller worst-case time. */
#ifndef ST_WINNERS_H
#define ST_WINNERS_H

typedef struct st_win_input {
  const char *dispatch_key;
  const char *shape_key;
  const char *variant_id;
  int is_default;
  double us; /* measured time; <= 0: no usable time (wrong, failed) */
} st_win_input;

typedef struct st_win_result {
  char dispatch_key[256];
  char variant_id[40];
  double regret;          /* >= 1                                        */
  double worst_us;        /* the winner's slowest shape of the key       */
  char default_id[40];    /* "" when no default variant covers the key   */
  double default_worst_us;
  int nshapes;
} st_win_result;

/* Fills *out (malloc'ed, *nout entries, one per dispatch key that has a
 * winner, sorted by dispatch key). Returns 0, or -1 out of memory. */
int st_pick_winners(const st_win_input *in, int n, st_win_result **out, int *nout);

#endif
