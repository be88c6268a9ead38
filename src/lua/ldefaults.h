/* ldefaults.h: the defaults the binding starts every def from: the core's
 * *_def_default(), the one place defaults live (see ldefaults.c for the one
 * value that waits on the core). */
#ifndef LDEFAULTS_H
#define LDEFAULTS_H

#include "fth_infer.h"
#include "fth_train.h"

/// fth_train_def_default(), as the binding and the YAML schema apply it.
fth_train_def ldefaults_train(void);
/// fth_infer_def_default(), as the binding and the YAML schema apply it.
fth_infer_def ldefaults_infer(void);

#endif
