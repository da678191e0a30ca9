/*
 * ipmi_sim module: answer DCMI "Get Power Reading" (netfn 0x2C, group 0xDC, cmd 0x02).
 *
 * Stock ipmi_sim answers DCMI with "Invalid command", so `ipmitool dcmi power reading`
 * cannot be tested against it. Loaded from lan.conf with
 *     loadlib "/path/dcmi_power.so" "/path/to/power_w_file"
 * it reads the instantaneous power in whole watts (ASCII) from that file on every request,
 * so a test changes the reading by rewriting the file. A missing or unreadable file
 * answers completion code 0xCB ("requested data not present"), as a BMC without a meter does.
 * Two more states, as older BMCs show them:
 *   "<watts> deactivated"  a reading whose state says the power measurement is deactivated;
 *   "silent"               no answer at all (the response is dropped), while every other
 *                          command, the SDR included, is still answered;
 *   "busy"                 completion code 0xD5 ("command not supported in present state"),
 *                          a refusal that holds only for now (a BMC still starting its meter).
 *
 * Build: gcc -shared -fPIC -I/usr/include -o dcmi_power.so dcmi_power.c
 * (symbols such as check_msg_length resolve against the ipmi_sim executable at load time).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <OpenIPMI/mcserv.h>
#include <OpenIPMI/lanserv.h>

#define DCMI_GROUP 0xDC
#define DCMI_CMD_GET_POWER_READING 0x02
#define CC_DATA_NOT_PRESENT 0xCB
#define CC_NOT_IN_PRESENT_STATE 0xD5

static char power_file[512];
static sys_data_t *sim_sys;
static int drop_next_answer;

/* Called before every response goes out; non-zero means "handled", so it is never sent. */
static int drop_silent_dcmi_answer(channel_t *chan, msg_t *msg, rsp_msg_t *rsp)
{
    if (drop_next_answer && msg->netfn == 0x2c && msg->len >= 1 && msg->data[0] == DCMI_GROUP) {
        drop_next_answer = 0;
        return 1;
    }
    return 0;
}

/* The channels exist only once the config is read, so the hook is set on the first request. */
static void hook_channels(lmc_data_t *mc)
{
    channel_t **channels = sim_sys->mc_get_channelset(mc);
    int i;

    for (i = 0; channels && i < IPMI_MAX_CHANNELS; i++)
        if (channels[i] && !channels[i]->oem.oem_handle_rsp)
            channels[i]->oem.oem_handle_rsp = drop_silent_dcmi_answer;
}

static void put_u16(unsigned char *p, unsigned int v) { p[0] = v & 0xff; p[1] = (v >> 8) & 0xff; }

static void put_u32(unsigned char *p, unsigned long v)
{
    p[0] = v & 0xff; p[1] = (v >> 8) & 0xff; p[2] = (v >> 16) & 0xff; p[3] = (v >> 24) & 0xff;
}

static void handle_dcmi(lmc_data_t *mc, msg_t *msg, unsigned char *rdata,
                        unsigned int *rdata_len, void *cb_data)
{
    FILE *f;
    long watts = -1;
    char state[32] = "";

    if (msg->cmd != DCMI_CMD_GET_POWER_READING) {
        handle_invalid_cmd(mc, rdata, rdata_len);
        return;
    }
    /* Request: group id, mode (1 = power status), mode attributes, reserved. */
    if (check_msg_length(msg, 4, rdata, rdata_len))
        return;
    hook_channels(mc);
    f = fopen(power_file, "r");
    if (f) {
        if (fscanf(f, "%31s", state) == 1 && strcmp(state, "silent") == 0) {
            fclose(f);
            drop_next_answer = 1;
            handle_invalid_cmd(mc, rdata, rdata_len);  /* built, then dropped */
            return;
        }
        if (strcmp(state, "busy") == 0) {
            fclose(f);
            rdata[0] = CC_NOT_IN_PRESENT_STATE;
            rdata[1] = DCMI_GROUP;
            *rdata_len = 2;
            return;
        }
        rewind(f);
        state[0] = 0;
        if (fscanf(f, "%ld %31s", &watts, state) < 1)
            watts = -1;
        fclose(f);
    }
    if (watts < 0 || watts > 0xffff) {
        rdata[0] = CC_DATA_NOT_PRESENT;
        rdata[1] = DCMI_GROUP;
        *rdata_len = 2;
        return;
    }
    /* Response: cc, group id, current/min/max/avg W (16-bit LE), timestamp (32-bit),
     * statistics period ms (32-bit), reading state (bit 6: power measurement active). */
    rdata[0] = 0;
    rdata[1] = DCMI_GROUP;
    put_u16(rdata + 2, watts);
    put_u16(rdata + 4, watts);
    put_u16(rdata + 6, watts);
    put_u16(rdata + 8, watts);
    put_u32(rdata + 10, (unsigned long) time(NULL));
    put_u32(rdata + 14, 1000);
    rdata[18] = strcmp(state, "deactivated") == 0 ? 0x00 : 0x40;
    *rdata_len = 19;
}

int ipmi_sim_module_print_version(sys_data_t *sys, char *options)
{
    printf("dcmi_power module 1.0\n");
    return 0;
}

int ipmi_sim_module_init(sys_data_t *sys, const char *options)
{
    if (!options || !*options) {
        fprintf(stderr, "dcmi_power: loadlib needs the power file path as its option\n");
        return EINVAL;
    }
    sim_sys = sys;
    strncpy(power_file, options, sizeof(power_file) - 1);
    ipmi_emu_register_group_extension_handler(DCMI_GROUP, handle_dcmi, NULL);
    return 0;
}
