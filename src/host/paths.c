/* placeholder until the host lands */
typedef int fth_paths_placeholder;
