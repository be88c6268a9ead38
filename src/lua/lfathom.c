/* placeholder until the binding lands */
typedef int fth_lua_placeholder;
